// customFields converts a record's custom field values between plain
// JSON values and the map<string, google.protobuf.Value> that Connect and
// gRPC carry them in (a contact's or lead's customFields, and a create's
// or update's). A Value is a oneof message ({kind: {case: "numberValue",
// value: 25000}}), awkward to write and read by hand.
import { fromJson, toJson } from "@bufbuild/protobuf";
import { ValueSchema, type Value } from "@bufbuild/protobuf/wkt";

/**
 * A custom field's value as the API answers it: text, url, email, date
 * ("YYYY-MM-DD"), datetime (RFC 3339) and select are strings, number a
 * number, boolean a boolean, multiselect an array of option values.
 */
export type CustomFieldValue = string | number | boolean | string[];

/** A record's custom values: key to value. */
export type CustomFieldValues = { [key: string]: CustomFieldValue };

/**
 * Values to send: a value, or null to clear the key in an update (in a
 * create, null is no value). A key whose value is undefined is not sent.
 */
export type CustomFieldInput<T extends CustomFieldValues = CustomFieldValues> = {
  [K in keyof T]?: T[K] | null;
};

/** The map of google.protobuf.Value a message's customFields holds. */
export type CustomFieldValueMap = { [key: string]: Value };

function toValue(key: string, v: CustomFieldValue | null): Value {
  const refuse = (what: string) => new TypeError(`customFields.${key}: ${what}`);
  if (v === null || typeof v === "string" || typeof v === "boolean") return fromJson(ValueSchema, v);
  if (typeof v === "number") {
    if (!Number.isFinite(v)) throw refuse("a number must be finite");
    return fromJson(ValueSchema, v);
  }
  if (Array.isArray(v)) {
    if (!v.every((x) => typeof x === "string")) throw refuse("a multiselect value is an array of option values (strings)");
    return fromJson(ValueSchema, v);
  }
  throw refuse(`${typeof v} is not a custom field value (string, number, boolean, array of strings, or null)`);
}

export const customFields = {
  /**
   * toValues turns plain values into the map a create or update message
   * takes: `customFields.toValues({budget: 25000, interest: "crm"})`.
   * null clears a key in an update; undefined leaves the key out. A value
   * no field type has (NaN, an object) throws a TypeError naming the key.
   * Give the type of the workspace's fields to check the keys and values
   * at compile time: `customFields.toValues<LeadFields>({...})`.
   */
  toValues<T extends CustomFieldValues = CustomFieldValues>(values: CustomFieldInput<T>): CustomFieldValueMap {
    const out: CustomFieldValueMap = {};
    for (const [key, v] of Object.entries(values) as [string, CustomFieldValue | null | undefined][]) {
      if (v !== undefined) out[key] = toValue(key, v);
    }
    return out;
  },

  /**
   * fromValues turns a record's customFields (an answer's map of Value)
   * into plain values: `customFields.fromValues(lead.customFields).budget`
   * is a number. Give the workspace's field types to read them typed:
   * `customFields.fromValues<LeadFields>(lead.customFields)`; a record
   * holds only the fields it has values for, so each may be absent.
   */
  fromValues<T extends CustomFieldValues = CustomFieldValues>(map: CustomFieldValueMap | undefined): Partial<T> {
    const out: { [key: string]: unknown } = {};
    for (const [key, v] of Object.entries(map ?? {})) {
      const json = toJson(ValueSchema, v);
      if (json !== null) out[key] = json;
    }
    return out as Partial<T>;
  },
};
