// verifyWebhook against signatures it did not make: the official vector of
// the Standard Webhooks libraries, and a two-secret (rotation) vector made
// by the server's Go signer (internal/webhook/signature's tests hold the
// same numbers), then the refusals: tampered body, stale or future
// timestamp, wrong secret, missing headers.
import { test } from "node:test";
import assert from "node:assert/strict";

import { verifyWebhook, WebhookVerificationError } from "../dist/index.js";

// TestWebhookSign in standard-webhooks/standard-webhooks, libraries/go/webhook_test.go.
const official = {
  secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
};

// Made by signature.Sign in Go: secrets of bytes 0..31 and 32..63.
const rotation = {
  oldSecret: "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
  newSecret: "whsec_ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=",
  id: "evt_0123",
  timestamp: 1764115200,
  body: '{"id":"evt_0123","type":"lead.created","data":{"object":{"name":"Zoë"}}}',
  signature:
    "v1,Faokco/71zazSblomguLCN+68D/vZlbCOnXczlJkw3Y= v1,4YsAuJz+43ivYCvBwXJpyit4yAQNtqX+P2A9E/t7KkM=",
};

const headersOf = (v, signature = v.signature) => ({
  "webhook-id": v.id,
  "webhook-timestamp": String(v.timestamp),
  "webhook-signature": signature,
});
const at = (v, deltaSeconds = 0) => ({ now: (v.timestamp + deltaSeconds) * 1000 });

function refused(fn, code) {
  assert.throws(fn, (err) => {
    assert.ok(err instanceof WebhookVerificationError, `want a WebhookVerificationError, got ${err}`);
    assert.equal(err.code, code);
    return true;
  });
}

test("the official Standard Webhooks vector verifies", () => {
  const event = verifyWebhook(official.secret, headersOf(official), official.body, at(official, 60));
  assert.deepEqual(event, { test: 2432232314 });
});

test("the Go signer's two signatures verify with either secret, as a string or bytes, Headers or a record", () => {
  const bytes = new TextEncoder().encode(rotation.body);
  for (const secret of [rotation.oldSecret, rotation.newSecret, [rotation.oldSecret, rotation.newSecret]]) {
    for (const body of [rotation.body, bytes, Buffer.from(rotation.body)]) {
      const event = verifyWebhook(secret, headersOf(rotation), body, at(rotation));
      assert.equal(event.id, "evt_0123");
      assert.equal(event.data.object.name, "Zoë");
    }
  }
  const h = new Headers({
    "Webhook-Id": rotation.id,
    "Webhook-Timestamp": String(rotation.timestamp),
    "Webhook-Signature": rotation.signature,
  });
  assert.equal(verifyWebhook(rotation.newSecret, h, rotation.body, at(rotation)).type, "lead.created");
  const mixedCase = {
    "Webhook-ID": rotation.id,
    "WEBHOOK-TIMESTAMP": String(rotation.timestamp),
    "webhook-Signature": rotation.signature,
  };
  assert.equal(verifyWebhook(rotation.oldSecret, mixedCase, rotation.body, at(rotation)).type, "lead.created");
});

test("a tampered body is refused", () => {
  refused(() => verifyWebhook(official.secret, headersOf(official), '{"test": 2432232315}', at(official)), "no_matching_signature");
  // Re-serialised JSON is not the bytes that were signed.
  const reserialised = JSON.stringify(JSON.parse(rotation.body), null, 1);
  refused(() => verifyWebhook(rotation.newSecret, headersOf(rotation), reserialised, at(rotation)), "no_matching_signature");
  refused(() => verifyWebhook(rotation.newSecret, headersOf(rotation), rotation.body + "\n", at(rotation)), "no_matching_signature");
});

test("another id or timestamp than the signed one is refused", () => {
  const h = headersOf(official);
  refused(() => verifyWebhook(official.secret, { ...h, "webhook-id": "msg_other" }, official.body, at(official)), "no_matching_signature");
  refused(
    () => verifyWebhook(official.secret, { ...h, "webhook-timestamp": String(official.timestamp + 1) }, official.body, at(official)),
    "no_matching_signature",
  );
});

test("a stale or future timestamp is refused, within tolerance accepted", () => {
  verifyWebhook(official.secret, headersOf(official), official.body, at(official, 300));
  verifyWebhook(official.secret, headersOf(official), official.body, at(official, -300));
  refused(() => verifyWebhook(official.secret, headersOf(official), official.body, at(official, 301)), "timestamp_too_old");
  refused(() => verifyWebhook(official.secret, headersOf(official), official.body, at(official, -301)), "timestamp_too_new");
  refused(
    () => verifyWebhook(official.secret, headersOf(official), official.body, { ...at(official, 90), toleranceSeconds: 60 }),
    "timestamp_too_old",
  );
  // Without `now`, the 2021 vector is years old.
  refused(() => verifyWebhook(official.secret, headersOf(official), official.body), "timestamp_too_old");
  refused(
    () => verifyWebhook(official.secret, { ...headersOf(official), "webhook-timestamp": "2021-02-25T15:02:10Z" }, official.body, at(official)),
    "invalid_timestamp",
  );
});

test("a wrong secret is refused", () => {
  refused(() => verifyWebhook(rotation.oldSecret, headersOf(official), official.body, at(official)), "no_matching_signature");
  // Only the new signature is sent once the old secret expired.
  const onlyNew = rotation.signature.split(" ")[1];
  refused(() => verifyWebhook(rotation.oldSecret, headersOf(rotation, onlyNew), rotation.body, at(rotation)), "no_matching_signature");
  verifyWebhook(rotation.newSecret, headersOf(rotation, onlyNew), rotation.body, at(rotation));
});

test("unknown signature versions are ignored", () => {
  const sig = `v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v1a,abc ${official.signature} v1,AAAA`;
  verifyWebhook(official.secret, headersOf(official, sig), official.body, at(official));
  const v2only = official.signature.replace("v1,", "v2,");
  refused(() => verifyWebhook(official.secret, headersOf(official, v2only), official.body, at(official)), "no_matching_signature");
});

test("missing headers are refused", () => {
  for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
    const h = headersOf(official);
    delete h[name];
    refused(() => verifyWebhook(official.secret, h, official.body, at(official)), "missing_header");
  }
});

test("a malformed secret is a TypeError, not a refused delivery", () => {
  for (const secret of ["", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_", "whsec_not base64!", "whsec_AAAA"]) {
    assert.throws(() => verifyWebhook(secret, headersOf(official), official.body, at(official)), TypeError, secret);
  }
});
