import { describe, expect, it } from "vitest";
import { ApiError } from "../../kube/client.js";
import { classifyRecordFailure } from "./dead-letter-failures.js";

describe("classifyRecordFailure", () => {
  it("tells RBAC from a ResourceQuota (both 403), another refusal and an outage", () => {
    const forbidden = new ApiError(403, "Forbidden", 'webhookdeliveries.hookline.dev is forbidden: User "system:serviceaccount:hl:hl" cannot create resource "webhookdeliveries" in API group "hookline.dev" in the namespace "shop"');
    const quota = new ApiError(403, "Forbidden", 'webhookdeliveries.hookline.dev "evt-1.acme" is forbidden: exceeded quota: hookline-deliveries, requested: count/webhookdeliveries.hookline.dev=1, used: count/webhookdeliveries.hookline.dev=5, limited: count/webhookdeliveries.hookline.dev=5');
    expect(classifyRecordFailure(forbidden)).toBe("forbidden");
    expect(classifyRecordFailure(quota)).toBe("quota");
    expect(classifyRecordFailure(new ApiError(422, "Invalid", "spec.eventType: Invalid value"))).toBe("refused");
    expect(classifyRecordFailure(new ApiError(500, "InternalError", "etcdserver: request timed out"))).toBe("error");
    expect(classifyRecordFailure(new ApiError(429, "TooManyRequests", "slow down"))).toBe("error");
    expect(classifyRecordFailure(new Error("fetch failed"))).toBe("error");
  });
});
