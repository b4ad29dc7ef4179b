"""The fairshare check: after short jobs charged to two sibling accounts whose shares differ (3:1
in the local inventory), Slurm's recalculated fair-share factors put the under-served account
first, in sshare and in sprio's ranking of two otherwise identical pending jobs.

Deterministic, not a race: the check reads each account's recorded usage first, charges both
(one short job each, then a top-up of one of them) so that the account with the larger share has
used more than the other but less than its share allows (so only the shares, not the usage alone,
make it the under-served one), then holds one node with a job of a third account and submits one
pending job per account to that node, the under-served account's last (waiting time can only
count against it). It waits for Slurm's next recalculation (PriorityCalcPeriod: Fair Tree computes
the factors only then), seen as the pending jobs' age factor rising above 0, and judges sshare and
sprio (``judge.judge_fairshare``). Past usage that would take more than ``TOPUP_MAX_S`` of jobs to
arrange so is left as it is: the order is then predicted from the usage as recorded (a warning
says that the usage alone predicts it too).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Any

from cluster_cli.smoke.context import CheckContext
from cluster_cli.smoke.judge import judge_fairshare, under_served
from cluster_cli.smoke.report import CheckResult, Verdict

NAME = "fairshare"
SLEEP_SCRIPT = "#!/bin/bash\n# charges its account for as long as it sleeps\nsleep \"$1\"\n"
HOLD_SCRIPT = "#!/bin/bash\n# holds the node until the check cancels it\nsleep 900\n"
FIRST_CHARGE_S = 3
"""Each account's first job: short jobs that really ran."""
TOPUP_MAX_S = 30
"""Longest top-up the check runs to arrange the usage (see the module's docstring)."""
RECALC_SLACK_S = 15.0
"""Beyond one PriorityCalcPeriod, how long the check waits for the recalculation."""
# The priority plugin that computes fair-share factors (slurm.conf PriorityType).
MULTIFACTOR = "priority/multifactor"
SSHARE_FIELDS = "Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare,LevelFS"
SPRIO_FORMAT = "%i|%a|%F|%Y"


@dataclass(frozen=True)
class ShareRow:
    """One line of ``sshare -P -n -o SSHARE_FIELDS``: an account's row (``user`` "") or a user's."""

    account: str
    user: str
    norm_shares: float | None
    raw_usage: int
    effective: float | None
    fairshare: float | None
    level_fs: float | None


def _number(text: str) -> float | None:
    text = text.strip()
    if not text:
        return None
    try:
        return float(text)  # "inf" too: no usage yet
    except ValueError:
        return None


def parse_sshare(text: str) -> list[ShareRow]:
    """The rows of ``sshare -P -n -o SSHARE_FIELDS`` (accounts' rows have no user)."""
    rows = []
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) < 8:
            continue
        raw = _number(fields[4])
        rows.append(ShareRow(fields[0].strip(), fields[1].strip(), _number(fields[3]), int(raw or 0),
                             _number(fields[5]), _number(fields[6]), _number(fields[7])))
    return rows


def parse_sprio(text: str) -> dict[str, dict[str, float]]:
    """Job id -> {"age", "fairshare", "priority"} from ``sprio -h -o SPRIO_FORMAT`` (the age factor
    normalised 0..1; the fair-share part and the job priority weighted, as Slurm adds them up)."""
    jobs: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        fields = [field.strip() for field in line.split("|")]
        if len(fields) == 4 and fields[0]:
            values = [_number(field) for field in fields[1:]]
            if all(value is not None for value in values):
                age, fairshare, priority = (float(value or 0) for value in values)
                jobs[fields[0]] = {"age": age, "fairshare": fairshare, "priority": priority}
    return jobs


def calc_period_s(config: dict[str, str]) -> int:
    """PriorityCalcPeriod in seconds from ``scontrol show config`` (``00:05:00``); Slurm's 5 min default."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+):(\d+):(\d+)", config.get("PriorityCalcPeriod", "").strip())
    if not match:
        return 300
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def billing(tres: str) -> float:
    """``billing=N`` of a job's TRES (``cpu=2,mem=3G,node=1,billing=1,gres/gpu=1``); 1 when absent."""
    match = re.search(r"(?:^|,)billing=([\d.]+)", tres)
    return float(match.group(1)) if match else 1.0


def arrangement(high: float, low: float, ratio: float) -> tuple[int | None, float]:
    """What to charge so that the account with ``ratio`` times the other's shares (usage ``high``)
    has used more than the other (``low``) but less than ``ratio`` times as much, each by a margin:
    (0 to charge the first account, 1 the second, None for neither; billing-seconds). The target
    is the middle, sqrt(ratio) times the other's usage."""
    margin = min(1.25, ratio ** 0.25)
    middle = math.sqrt(ratio)
    if high < low * margin:
        return 0, low * middle - high
    if high > low * ratio / margin:
        return 1, high / middle - low
    return None, 0.0


def check_fairshare(ctx: CheckContext) -> CheckResult:
    """Two pending jobs, alike but for their accounts: the under-served account's ranks first."""
    spec, target = ctx.target.fairshare, ctx.target
    if not spec:
        return CheckResult(NAME, Verdict.SKIP, "the inventory has no two sibling accounts with different fair-share "
                           "shares that the test user may charge (or its priority.type is basic)")
    if not target.accounting_enabled:
        return CheckResult(NAME, Verdict.SKIP, "accounting is off: Slurm records no usage to share fairly")
    running = ctx.config.get("PriorityType", "").strip()
    if running != MULTIFACTOR:
        (high, low), (s_high, s_low) = spec["accounts"], spec["shares"]
        return CheckResult(NAME, Verdict.FAIL, f"PriorityType is {running or 'not set'}: jobs are not ordered by fair "
                           f"share, though the inventory gives {high} and {low} shares {s_high}:{s_low} "
                           f"(priority.type: multifactor)")
    period = calc_period_s(ctx.config)
    needed = 2 * TOPUP_MAX_S + period + RECALC_SLACK_S
    if needed > ctx.remaining():
        return CheckResult(NAME, Verdict.SKIP, f"Slurm recalculates the fair-share factors every {period} s "
                           f"(PriorityCalcPeriod), longer than this check's budget allows: it needs about "
                           f"{needed:.0f} s (--timeout), or a shorter PriorityCalcPeriod")
    usable = [node for node in target.nodes if node not in ctx.unusable_nodes]
    if not usable:
        return CheckResult(NAME, Verdict.FAIL, "no node of the partition can take jobs: "
                           + ", ".join(f"{node} {state}" for node, state in sorted(ctx.unusable_nodes.items())))
    run = _Run(ctx, spec, usable, period)
    try:
        return run.check()
    finally:
        for job in run.jobs:
            ctx.session.cancel(job)


class _Run:
    """One run of the check: its jobs (all cancelled at the end), the figures it read."""

    def __init__(self, ctx: CheckContext, spec: dict[str, Any], nodes: list[str], period: int) -> None:
        self.ctx, self.spec, self.nodes, self.period = ctx, spec, nodes, period
        self.accounts: list[str] = list(spec["accounts"])
        self.shares: list[int] = [int(share) for share in spec["shares"]]
        self.work = ctx.check_dir(NAME)
        self.sleep = ctx.write_script(NAME, "charge.sh", SLEEP_SCRIPT)
        self.hold = ctx.write_script(NAME, "hold.sh", HOLD_SCRIPT)
        self.jobs: list[str] = []
        self.view = "accounts"

    def check(self) -> CheckResult:
        before = self.usage()
        rate = self.charge({0: FIRST_CHARGE_S, 1: FIRST_CHARGE_S})
        charged = self.settled(before)
        if charged is None:
            return self.not_recorded(before)
        sensitive = True
        for _ in range(2):
            which, units = arrangement(charged[0], charged[1], self.shares[0] / self.shares[1])
            if which is None:
                break
            parallel = self.parallel(which)
            seconds = max(1, round(units / (rate * parallel)))
            if seconds > TOPUP_MAX_S:
                sensitive = False
                break
            self.charge({which: seconds}, parallel)
            charged = self.settled(charged, (which,)) or self.usage()
        else:
            sensitive = arrangement(charged[0], charged[1], self.shares[0] / self.shares[1])[0] is None
        pending, waited = self.pending_pair(charged)
        rows = self.rows()
        return judge_fairshare(
            self.accounts, self.shares, before, self.figures(rows), pending, sensitive=sensitive,
            waited_s=waited, period_s=self.period, view=self.view,
            priority_type=self.ctx.config.get("PriorityType", "?"), job_ids=list(self.jobs),
        )

    # --- usage --------------------------------------------------------------------------------

    def rows(self) -> list[ShareRow]:
        """sshare of the two accounts: their own rows where the suite may see them (root, or no
        PrivateData=usage), and the test user's rows in them."""
        argv = ["sshare", "-P", "-n", "-a", "-A", ",".join(self.accounts), "-o", SSHARE_FIELDS]
        done = self.ctx.session.run(argv, timeout=30, as_caller=True)
        rows = parse_sshare(done.stdout) if done.returncode == 0 else []
        if not any(row.user == "" for row in rows):
            self.view = "user"
            done = self.ctx.session.run(argv, timeout=30)
            rows = parse_sshare(done.stdout) if done.returncode == 0 else []
        return rows

    def figures(self, rows: list[ShareRow]) -> dict[str, dict[str, Any]]:
        """Per account: RawUsage (the account's, else the test user's in it), EffectvUsage,
        NormShares and LevelFS of the account's row, FairShare of the test user's row."""
        user = self.ctx.session.user.name
        result: dict[str, dict[str, Any]] = {}
        for account in self.accounts:
            own = next((row for row in rows if row.account == account and row.user == ""), None)
            mine = next((row for row in rows if row.account == account and row.user == user), None)
            usage = own.raw_usage if own else (mine.raw_usage if mine else 0)
            result[account] = {
                "raw_usage": usage,
                "effective": own.effective if own else None,
                "norm_shares": own.norm_shares if own else None,
                "level_fs": own.level_fs if own else None,
                "fairshare": mine.fairshare if mine else None,
            }
        return result

    def usage(self) -> list[int]:
        figures = self.figures(self.rows())
        return [int(figures[account]["raw_usage"]) for account in self.accounts]

    def settled(self, before: list[int], charged: tuple[int, ...] = (0, 1)) -> list[int] | None:
        """The usage once that of each account charged has risen (Slurm adds a job's usage when it
        ends) and stopped changing; None when one has not risen within 15 s."""
        deadline = time.monotonic() + min(15.0, self.ctx.remaining())
        last: list[int] | None = None
        while time.monotonic() < deadline:
            now = self.usage()
            if all(now[which] > before[which] for which in charged) and now == last:
                return now
            last = now
            time.sleep(1.0)
        return None

    def not_recorded(self, before: list[int]) -> CheckResult:
        now = self.usage()
        seen = ", ".join(f"{account} {old} -> {new}" for account, old, new in zip(self.accounts, before, now,
                                                                                  strict=True))
        return CheckResult(NAME, Verdict.FAIL, f"the accounts' recorded usage (sshare RawUsage) did not rise after "
                           f"their jobs ran: {seen} (PriorityType={self.ctx.config.get('PriorityType', '?')})",
                           job_ids=list(self.jobs))

    # --- jobs ---------------------------------------------------------------------------------

    def args(self, account: str, *more: str) -> list[str]:
        return [*self.ctx.job_args(NAME), f"--account={account}", "--nodes=1", "--exclusive",
                f"--output={self.work}/slurm-%j.out", *more]

    def parallel(self, which: int) -> int:
        """One-node jobs the account may run at once: the usable nodes, within its GPU cap."""
        cap, gpus = self.spec["gpu_caps"][which], self.ctx.target.gpus_per_node
        fits = cap // gpus if cap is not None and gpus else len(self.nodes)
        return max(1, min(len(self.nodes), fits))

    def charge(self, seconds: dict[int, int], parallel: int = 1) -> float:
        """Run ``parallel`` one-node jobs per account index for the seconds given, all at once;
        returns the smallest billing of one of them (billing-seconds per second)."""
        jobs = []
        for which, length in seconds.items():
            for _ in range(parallel):
                args = self.args(self.accounts[which], f"--qos={self.spec['qos']}", str(self.sleep), str(length))
                jobs.append(self.ctx.session.sbatch(args, cwd=self.work))
        self.jobs.extend(jobs)
        rates = []
        for job in jobs:
            info = self.ctx.session.wait(job, self.ctx.remaining(), until=lambda info: info.state == "RUNNING"
                                         or info.finished)
            rates.append(billing(info.get("TRES")))
        for job in jobs:
            info = self.ctx.session.wait(job, self.ctx.remaining())
            if info.state != "COMPLETED":
                raise RuntimeError(f"charge job {job} ended {info.state} ({info.get('Reason')})")
        return min(rates) if rates else 1.0

    def pending_pair(self, charged: list[int]) -> tuple[dict[str, dict[str, Any]], float]:
        """Hold one node with a job of another account, queue one job per account on it (the
        expected under-served account's last), wait for the next recalculation of their factors;
        returns each account's pending job with its sprio figures, and the seconds waited."""
        under = under_served(self.accounts, self.shares, charged)
        over = self.accounts[1 - self.accounts.index(under)] if under else self.accounts[1]
        node = self.nodes[0]
        holder = self.spec.get("neutral") or over
        hold = self.ctx.session.sbatch(self.args(holder, f"--nodelist={node}", str(self.hold)), cwd=self.work)
        self.jobs.append(hold)
        info = self.ctx.session.wait(hold, self.ctx.remaining(), until=lambda info: info.state == "RUNNING"
                                     or info.finished)
        if info.state != "RUNNING":
            raise RuntimeError(f"the job holding {node} ({hold}) is {info.state}, not RUNNING")
        queued = {}
        for account in (over, under or self.accounts[0]):
            args = self.args(account, f"--qos={self.spec['qos']}", f"--nodelist={node}", str(self.sleep), "1")
            queued[account] = self.ctx.session.sbatch(args, cwd=self.work)
            self.jobs.append(queued[account])
        start = time.monotonic()
        deadline = start + min(self.period + RECALC_SLACK_S, self.ctx.remaining())
        weighted_age = self.ctx.config.get("PriorityWeightAge", "0").strip() not in ("0", "")
        factors: dict[str, dict[str, float]] = {}
        while True:
            done = self.ctx.session.run(["sprio", "-h", "-j", ",".join(queued.values()), "-o", SPRIO_FORMAT],
                                        timeout=30)
            factors = parse_sprio(done.stdout)
            recalculated = all(factors.get(job, {}).get("age", 0) > 0 for job in queued.values())
            if (weighted_age and recalculated) or time.monotonic() >= deadline:
                break
            time.sleep(2.0)
        waited = time.monotonic() - start
        pending = {account: {"job": job, **factors.get(job, {}), "state": self.ctx.session.job_info(job).state}
                   for account, job in queued.items()}
        if done.returncode != 0:
            for figures in pending.values():
                figures["sprio"] = done.output.strip()
        return pending, waited
