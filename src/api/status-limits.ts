// The status fitters of the three kinds, by resource plural: what the operator's status writer
// applies to every status it sends (see fit.ts), so each string and list is within its limit.
import { deliveryStatusSchema } from "./delivery.js";
import { fitToSchema } from "./fit.js";
import { DELIVERY, REPLAY, SUBSCRIPTION } from "./names.js";
import { replayStatusSchema } from "./replay.js";
import { subscriptionStatusSchema } from "./subscription.js";

export const STATUS_FITTERS: Readonly<Record<string, (status: unknown) => unknown>> = {
  [DELIVERY.plural]: (s) => fitToSchema(deliveryStatusSchema, s),
  [SUBSCRIPTION.plural]: (s) => fitToSchema(subscriptionStatusSchema, s),
  [REPLAY.plural]: (s) => fitToSchema(replayStatusSchema, s),
};
