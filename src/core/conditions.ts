/**
 * Status conditions (Ready, Reconciling, Stalled, ScaledToZero) in the Kubernetes shape, and the
 * one way to update them, so that every reconciler writes conditions whose transition times move
 * only when their status does.
 */
export type ConditionStatus = 'True' | 'False' | 'Unknown';
/** `DeadLetters` (amqp Triggers): whether a message that failed is kept somewhere or dropped. */
export type ConditionType = 'Ready' | 'Reconciling' | 'Stalled' | 'ScaledToZero' | 'DeadLetters';

export interface Condition {
  type: ConditionType;
  status: ConditionStatus;
  reason: string;
  message: string;
  observedGeneration: number;
  lastTransitionTime: string;
}

/**
 * Sets one condition, keeping lastTransitionTime when the status did not change (Kubernetes
 * convention) and the list sorted by type so status is deterministic.
 */
export function setCondition(
  conditions: readonly Condition[] | undefined,
  next: Omit<Condition, 'lastTransitionTime'>,
  now: Date = new Date(),
): Condition[] {
  const list = [...(conditions ?? [])];
  const index = list.findIndex((c) => c.type === next.type);
  // Stryker disable next-line ConditionalExpression: equivalent, list[-1] is undefined as well
  const previous = index >= 0 ? list[index] : undefined;
  const lastTransitionTime =
    previous && previous.status === next.status ? previous.lastTransitionTime : now.toISOString();
  const condition: Condition = { ...next, lastTransitionTime };
  if (index >= 0) list[index] = condition;
  else list.push(condition);
  return list.sort((a, b) => a.type.localeCompare(b.type));
}

export function getCondition(
  conditions: readonly Condition[] | undefined,
  type: ConditionType,
): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}
