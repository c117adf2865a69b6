// Kubernetes-shaped conditions: setting one keeps its lastTransitionTime unless its status
// changes, and stamps the generation it was computed for.
import type { Condition } from "../api/fields.js";
import { toRfc3339 } from "./rfc3339.js";

export type ConditionStatus = "True" | "False" | "Unknown";

export interface ConditionInput {
  type: string;
  status: ConditionStatus;
  reason: string;
  message?: string;
}

export function getCondition(list: readonly Condition[] | undefined, type: string): Condition | undefined {
  return list?.find((c) => c.type === type);
}

export function setCondition(list: readonly Condition[] | undefined, input: ConditionInput, now: number, generation?: number): Condition[] {
  const current = getCondition(list, input.type);
  const next: Condition = {
    type: input.type,
    status: input.status,
    reason: input.reason,
    ...(input.message !== undefined ? { message: input.message } : {}),
    lastTransitionTime: current && current.status === input.status ? current.lastTransitionTime : toRfc3339(now),
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
  const others = (list ?? []).filter((c) => c.type !== input.type);
  return [...others, next].sort((a, b) => a.type.localeCompare(b.type));
}

/** Whether setting `input` would change anything but timestamps. */
export function conditionDiffers(list: readonly Condition[] | undefined, input: ConditionInput, generation?: number): boolean {
  const c = getCondition(list, input.type);
  return !c || c.status !== input.status || c.reason !== input.reason || (c.message ?? "") !== (input.message ?? "") || (generation !== undefined && c.observedGeneration !== generation);
}
