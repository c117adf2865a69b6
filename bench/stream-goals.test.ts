import { describe, expect, it } from "vitest";
import { duplicateIds, goalTable, machineCpu, ratePerSecond, shares, sharesWithin, streamGoals, type StreamMeasured } from "./lib/stream-goals.js";

const measured = (over: Partial<StreamMeasured> = {}): StreamMeasured => ({
  crDeliveriesPerSecond: 300,
  httpCeilingPerSecond: 10_000,
  streamDeliveriesPerSecond: 3_100,
  halfRateP99Ms: 12,
  cpuSecondsPer1000: 0.4,
  twoReplicas: { deliveriesPerSecond: 4_000, cpuSecondsPer1000: 0.5, shares: [0.48, 0.52], duplicates: 0 },
  ...over,
});

describe("stream bench computations", () => {
  it("shares: fractions of the sum, all 0 for nothing", () => {
    expect(shares([60, 40])).toEqual([0.6, 0.4]);
    expect(shares([1, 2])).toEqual([0.333, 0.667]);
    expect(shares([0, 0])).toEqual([0, 0]);
    expect(sharesWithin([0.4, 0.6], 0.4, 0.6)).toBe(true);
    expect(sharesWithin([0.399, 0.601], 0.4, 0.6)).toBe(false);
    expect(sharesWithin([], 0.4, 0.6)).toBe(false);
  });

  it("rate from first send to last arrival; NaN without a span", () => {
    expect(ratePerSecond(1000, 10_000, 12_000)).toBe(500);
    expect(ratePerSecond(1000, 10_000, 10_000)).toBeNaN();
    expect(ratePerSecond(0, 0, 1000)).toBeNaN();
  });

  it("duplicates: ids that came more than once", () => {
    expect(duplicateIds(new Map([["a", { count: 1 }], ["b", { count: 2 }], ["c", { count: 3 }]]))).toEqual(["b", "c"]);
  });

  it("goals pass and fail on the measured numbers, and NaN never passes", () => {
    const verdicts = (m: StreamMeasured) => Object.fromEntries(streamGoals(m).filter((r) => r.pass !== undefined).map((r) => [r.goal, r.pass]));
    expect(verdicts(measured())).toEqual({ "≥ ×10": true, "≥ 0.25": true, "< 20": true, "each 40-60%": true, "0": true });
    expect(verdicts(measured({ streamDeliveriesPerSecond: 2_000, halfRateP99Ms: 20, twoReplicas: { deliveriesPerSecond: 1, cpuSecondsPer1000: 1, shares: [0.7, 0.3], duplicates: 1 } }))).toEqual({ "≥ ×10": false, "≥ 0.25": false, "< 20": false, "each 40-60%": false, "0": false });
    expect(verdicts(measured({ streamDeliveriesPerSecond: NaN, halfRateP99Ms: NaN }))).toMatchObject({ "≥ ×10": false, "≥ 0.25": false, "< 20": false });
    expect(goalTable(streamGoals(measured()))).toMatch(/^\| Measure \| Value \| Goal \| Result \|/);
    expect(goalTable(streamGoals(measured({ halfRateP99Ms: 30 })))).toContain("**FAIL**");
  });

  it("the stored backlog's rate is held against half the HTTP ceiling, when it was measured", () => {
    const backlogVerdict = (m: StreamMeasured) => streamGoals(m).find((r) => r.goal === "≥ 0.5")?.pass;
    expect(backlogVerdict(measured())).toBeUndefined();
    const ceiling = measured().httpCeilingPerSecond;
    expect(backlogVerdict(measured({ backlog: { deliveriesPerSecond: ceiling / 2, cpuSecondsPer1000: 0.16 } }))).toBe(true);
    expect(backlogVerdict(measured({ backlog: { deliveriesPerSecond: ceiling / 2 - 1, cpuSecondsPer1000: 0.16 } }))).toBe(false);
    expect(backlogVerdict(measured({ backlog: { deliveriesPerSecond: NaN, cpuSecondsPer1000: NaN } }))).toBe(false);
  });
});

describe("machine CPU per delivery (a stored backlog)", () => {
  it("splits the machine's CPU by process, and gives the rate its cores allow at that cost", () => {
    const a = { machine: 100, operator: 10, natsServer: 5, receiver: 2, operatorReads: 1_000, operatorWrites: 500 };
    const b = { machine: 106, operator: 12, natsServer: 6, receiver: 2.5, operatorReads: 31_000, operatorWrites: 40_500 };
    const m = machineCpu(a, b, 20_000, 20_000, 2);
    expect(m).toEqual({
      cores: 2,
      operator: 0.1,
      natsServer: 0.05,
      receiver: 0.025,
      rest: 0.125,
      machine: 0.3,
      operatorReadsPerDelivery: 1.5,
      operatorWritesPerDelivery: 2,
      // 6 machine-seconds for 20,000: 2 cores all busy give 20,000 / 3 s.
      atMostPerSecond: 6667,
      atMostOfCeiling: 0.333,
      // half of 20,000/s on 2 cores: 2 / 10,000 s each.
      halfCeilingNeedsPer1000: 0.2,
      // of which nats-server, the receiver and the rest took 0.2: nothing left for the operator.
      operatorRoomPer1000: 0,
    });
  });

  it("gives no rate when the machine's CPU was not read", () => {
    const a = { machine: Number.NaN, operator: 0, natsServer: 0, receiver: 0, operatorReads: 0, operatorWrites: 0 };
    const m = machineCpu(a, a, 1_000, 10_000, 2);
    expect(m.atMostPerSecond).toBeNaN();
    expect(m.machine).toBeNaN();
  });
});
