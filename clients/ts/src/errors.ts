import { ConnectError } from "@connectrpc/connect";

import {
  BadRequestSchema,
  ErrorInfoSchema,
  RetryInfoSchema,
  type BadRequest_FieldViolation,
  type ErrorInfo,
} from "./gen/google/rpc/error_details_pb.js";

/** The details of an API error, decoded from a Connect or gRPC error. */
export interface ApiErrorDetails {
  /** The problem code, e.g. "validation_failed" (ErrorInfo.reason). */
  reason?: string;
  /** ErrorInfo, with metadata such as existingId or scope. */
  info?: ErrorInfo;
  /** The invalid fields of a validation error (BadRequest). */
  fieldViolations: BadRequest_FieldViolation[];
  /** Seconds to wait before retrying, on ResourceExhausted (RetryInfo). */
  retryAfterSeconds?: number;
}

/**
 * errorDetails decodes the google.rpc details the API attaches to every
 * error: ErrorInfo (reason = the problem code of the REST API), BadRequest
 * field violations and RetryInfo.
 *
 * @example
 *   try {
 *     await contacts.createContact({ contact: { email: "nope" } });
 *   } catch (err) {
 *     const d = errorDetails(err);
 *     // d.reason === "validation_failed"
 *     // d.fieldViolations[0].field === "email"
 *   }
 */
export function errorDetails(err: unknown): ApiErrorDetails {
  const ce = ConnectError.from(err);
  const info = ce.findDetails(ErrorInfoSchema)[0];
  const fieldViolations = ce.findDetails(BadRequestSchema).flatMap((b) => b.fieldViolations);
  const retry = ce.findDetails(RetryInfoSchema)[0];
  return {
    reason: info?.reason,
    info,
    fieldViolations,
    retryAfterSeconds: retry?.retryDelay ? Number(retry.retryDelay.seconds) : undefined,
  };
}
