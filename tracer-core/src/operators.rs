//! Operator calls (table `op`): a two-phase aclnn operator's first phase
//! (`aclnnXxxGetWorkspaceSize`, on the caller's thread) returns an executor that its second
//! phase (`aclnnXxx`, often on torch_npu's task-queue thread) runs. The first phase's
//! out-parameters sit at positions only the operator's header knows, so the probes read
//! through every argument at its return (`OutScan`), and the second phase that runs one of
//! those values as its executor, right after its workspace size, is that phase's. Only values
//! the call wrote count: callers set the executor to NULL before the call (op-plugin's
//! `EXEC_NPU_CMD`, MindSpore's `GEN_EXECUTOR`, the CANN samples), while the stack slots the
//! scan reads past the last parameter hold the caller's data, which may be any address,
//! among them one a later executor gets. A second phase whose executor no first phase
//! returned took it from the executor cache (`PTAGetExecCache`): it has no first phase.
use std::collections::{HashMap, HashSet, VecDeque};

use tracer_schema::rows::OpPhase;

/// First phases remembered while their executors wait to run (torch_npu's queue holds
/// thousands); the oldest go first beyond this.
const MAX_PENDING: usize = 65_536;

/// What a first phase's argument pointed at when the call returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pointee {
    pub value: u64,
    /// The call wrote it: it differs from what the argument pointed at on entry.
    pub written: bool,
}

/// First phases waiting for their second, by the values their arguments pointed at.
#[derive(Debug, Default)]
pub(crate) struct Operators {
    /// (pid, value) -> the first phases (by correlation id, oldest first) whose argument
    /// pointed at that value, with what the argument before it pointed at: an executor
    /// comes right after its workspace size.
    by_value: HashMap<(u32, u64), Vec<(u64, u64)>>,
    /// First phases by correlation id, with their process and claimed values.
    phases: HashMap<u64, (OpPhase, u32, Vec<u64>)>,
    /// Correlation ids in arrival order, for the bound.
    order: VecDeque<u64>,
    /// Executors that run more than once (`aclSetAclOpExecutorRepeatable`), by (pid, executor).
    repeatable: HashSet<(u32, u64)>,
}

impl Operators {
    /// A first phase of process `pid` returned successfully; `values[i]` is what its
    /// integer argument `i` pointed at, if anything (its workspace size and executor among
    /// them, one after the other). Values the call did not write claim nothing.
    pub(crate) fn prepared(&mut self, pid: u32, phase: OpPhase, values: &[Option<Pointee>]) {
        if self.order.len() >= MAX_PENDING
            && let Some(oldest) = self.order.pop_front()
        {
            self.forget(oldest);
        }
        let id = phase.correlation_id;
        let mut claimed = Vec::new();
        for pair in values.windows(2) {
            if let [
                Some(size),
                Some(Pointee {
                    value,
                    written: true,
                }),
            ] = *pair
                && value != 0
            {
                let size = size.value;
                self.by_value
                    .entry((pid, value))
                    .or_default()
                    .push((id, size));
                claimed.push(value);
            }
        }
        self.order.push_back(id);
        self.phases.insert(id, (phase, pid, claimed));
    }

    /// A second phase of process `pid` runs `executor` with a workspace of `workspace_size`
    /// bytes: the first phase that prepared it, if one did (the oldest waiting one that
    /// returned that executor after that size). A repeatable executor keeps it for its next
    /// run.
    pub(crate) fn ran(&mut self, pid: u32, executor: u64, workspace_size: u64) -> Option<OpPhase> {
        let claims = self.by_value.get(&(pid, executor))?;
        let &(id, _) = claims.iter().find(|&&(_, size)| size == workspace_size)?;
        let phase = self.phases.get(&id)?.0;
        if !self.repeatable.contains(&(pid, executor)) {
            self.forget(id);
        }
        Some(phase)
    }

    /// `executor` of `pid` may run more than once.
    pub(crate) fn set_repeatable(&mut self, pid: u32, executor: u64) {
        self.repeatable.insert((pid, executor));
    }

    /// `executor` of `pid` is gone: the first phase that made it no longer names anything.
    pub(crate) fn destroyed(&mut self, pid: u32, executor: u64) {
        self.repeatable.remove(&(pid, executor));
        if let Some(&(id, _)) = self.by_value.get(&(pid, executor)).and_then(|c| c.first()) {
            self.forget(id);
        }
    }

    /// The executor cache gave `pid` a new executor at `executor`. Claims on that address
    /// are stale: no first phase's executor that is still waiting can sit where a new object
    /// was just made, so what a first phase wrote there earlier (scratch data, a freed
    /// object's address) names nothing, and the run of this executor has no first phase.
    pub(crate) fn cached(&mut self, pid: u32, executor: u64) {
        self.repeatable.remove(&(pid, executor));
        let Some(claims) = self.by_value.remove(&(pid, executor)) else {
            return;
        };
        for (id, _) in claims {
            if let Some((_, _, values)) = self.phases.get_mut(&id) {
                values.retain(|&v| v != executor);
            }
        }
    }

    /// Processes with first phases or repeatable executors waiting.
    pub(crate) fn pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.phases
            .values()
            .map(|p| p.1)
            .chain(self.repeatable.iter().map(|k| k.0))
    }

    /// Forgets every first phase and executor of the processes `pids`.
    pub(crate) fn forget_processes(&mut self, pids: &HashSet<u32>) {
        self.by_value.retain(|k, _| !pids.contains(&k.0));
        self.phases.retain(|_, p| !pids.contains(&p.1));
        let phases = &self.phases;
        self.order.retain(|id| phases.contains_key(id));
        self.repeatable.retain(|k| !pids.contains(&k.0));
    }

    fn forget(&mut self, id: u64) {
        let Some((_, pid, values)) = self.phases.remove(&id) else {
            return;
        };
        for value in values {
            if let Some(claims) = self.by_value.get_mut(&(pid, value)) {
                claims.retain(|&(claim, _)| claim != id);
                if claims.is_empty() {
                    self.by_value.remove(&(pid, value));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(id: u64) -> OpPhase {
        OpPhase {
            correlation_id: id,
            api_name: "aclnnAddGetWorkspaceSize",
            tid: 1,
            start_ns: id * 10,
            end_ns: id * 10 + 5,
        }
    }

    /// A value the call wrote.
    fn out(value: u64) -> Option<Pointee> {
        Some(Pointee {
            value,
            written: true,
        })
    }

    /// A value that was there before the call.
    fn kept(value: u64) -> Option<Pointee> {
        Some(Pointee {
            value,
            written: false,
        })
    }

    #[test]
    fn second_phases_find_their_first_by_executor() {
        let mut ops = Operators::default();
        // (tensor, workspace size, executor)
        ops.prepared(7, phase(1), &[kept(5), out(64), out(0x1000)]);
        ops.prepared(7, phase(2), &[None, kept(0), out(0x2000)]);
        // A later first phase whose argument happens to point at a waiting executor.
        ops.prepared(7, phase(3), &[out(0x2000), kept(0), out(0x3000)]);
        assert_eq!(ops.ran(7, 0x2000, 0).map(|p| p.correlation_id), Some(2));
        assert_eq!(ops.ran(7, 0x2000, 0), None, "an executor runs once");
        assert_eq!(ops.ran(8, 0x1000, 64), None, "another process");
        assert_eq!(ops.ran(7, 0x1000, 32), None, "not after its workspace size");
        assert_eq!(ops.ran(7, 0x1000, 64).map(|p| p.correlation_id), Some(1));
        assert_eq!(ops.ran(7, 0x3000, 0).map(|p| p.correlation_id), Some(3));
        assert_eq!(ops.ran(7, 0x4000, 0), None, "a cache hit: no first phase");
        assert!(ops.phases.is_empty() && ops.by_value.is_empty());
    }

    #[test]
    fn repeatable_executors_keep_their_first_phase_until_destroyed() {
        let mut ops = Operators::default();
        ops.prepared(7, phase(1), &[kept(0), out(0x1000)]);
        ops.set_repeatable(7, 0x1000);
        assert!(ops.ran(7, 0x1000, 0).is_some());
        assert!(ops.ran(7, 0x1000, 0).is_some());
        ops.destroyed(7, 0x1000);
        assert_eq!(ops.ran(7, 0x1000, 0), None);
        assert!(ops.phases.is_empty() && ops.by_value.is_empty());
    }

    #[test]
    fn values_the_call_did_not_write_claim_nothing() {
        let mut ops = Operators::default();
        // Caller data past the last parameter: a zero, then an address a later executor gets.
        ops.prepared(7, phase(1), &[kept(0), out(0x1000), kept(0), kept(0x5000)]);
        assert_eq!(ops.ran(7, 0x5000, 0), None, "a cache hit's new executor");
        assert_eq!(ops.ran(7, 0x1000, 0).map(|p| p.correlation_id), Some(1));
    }

    #[test]
    fn a_cached_executor_drops_stale_claims_on_its_address() {
        let mut ops = Operators::default();
        // A first phase wrote a scratch address (later freed) besides its executor.
        ops.prepared(7, phase(1), &[kept(0), out(0x5000), kept(0), out(0x1000)]);
        // The cache hands out a new executor where the scratch object was.
        ops.cached(7, 0x5000);
        assert_eq!(
            ops.ran(7, 0x5000, 0),
            None,
            "a cache hit has no first phase"
        );
        assert_eq!(ops.ran(7, 0x1000, 0).map(|p| p.correlation_id), Some(1));
        assert!(ops.phases.is_empty() && ops.by_value.is_empty());
    }

    #[test]
    fn a_gone_process_leaves_nothing_behind() {
        let mut ops = Operators::default();
        ops.prepared(7, phase(1), &[kept(0), out(0x1000)]);
        ops.set_repeatable(7, 0x2000);
        ops.prepared(8, phase(2), &[kept(0), out(0x1000)]);
        ops.forget_processes(&HashSet::from([7]));
        assert_eq!(ops.pids().collect::<Vec<_>>(), [8]);
        assert_eq!(ops.order.len(), 1);
        assert_eq!(ops.ran(8, 0x1000, 0).map(|p| p.correlation_id), Some(2));
    }
}
