//! Operator calls (table `op`): a two-phase aclnn operator's first phase
//! (`aclnnXxxGetWorkspaceSize`, on the caller's thread) returns an executor that its second
//! phase (`aclnnXxx`, often on torch_npu's task-queue thread) runs. The first phase's
//! out-parameters sit at positions only the operator's header knows, so the probes read
//! through every argument at its return (`OutScan`), and the second phase that runs one of
//! those values as its executor is that phase's. A second phase whose executor no first
//! phase returned took it from the executor cache (`PTAGetExecCache`): it has no first phase.
use std::collections::{HashMap, HashSet, VecDeque};

use tracer_schema::rows::OpPhase;

/// First phases remembered while their executors wait to run (torch_npu's queue holds
/// thousands); the oldest go first beyond this.
const MAX_PENDING: usize = 65_536;

/// First phases waiting for their second, by the values their arguments pointed at.
#[derive(Debug, Default)]
pub(crate) struct Operators {
    /// (pid, value) -> the first phase (by its correlation id) that left it.
    by_value: HashMap<(u32, u64), u64>,
    /// First phases by correlation id, with their values.
    phases: HashMap<u64, (OpPhase, u32, Vec<u64>)>,
    /// Correlation ids in arrival order, for the bound.
    order: VecDeque<u64>,
    /// Executors that run more than once (`aclSetAclOpExecutorRepeatable`), by (pid, executor).
    repeatable: HashSet<(u32, u64)>,
}

impl Operators {
    /// A first phase of process `pid` returned successfully; `values` are what its
    /// arguments pointed at (its executor among them).
    pub(crate) fn prepared(&mut self, pid: u32, phase: OpPhase, values: Vec<u64>) {
        if self.order.len() >= MAX_PENDING
            && let Some(oldest) = self.order.pop_front()
        {
            self.forget(oldest);
        }
        for &value in &values {
            self.by_value.insert((pid, value), phase.correlation_id);
        }
        self.order.push_back(phase.correlation_id);
        self.phases
            .insert(phase.correlation_id, (phase, pid, values));
    }

    /// A second phase of process `pid` runs `executor`: the first phase that prepared it,
    /// if one did. A repeatable executor keeps it for its next run.
    pub(crate) fn ran(&mut self, pid: u32, executor: u64) -> Option<OpPhase> {
        let id = *self.by_value.get(&(pid, executor))?;
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

    /// `executor` of `pid` is gone: its first phase no longer names anything.
    pub(crate) fn destroyed(&mut self, pid: u32, executor: u64) {
        self.repeatable.remove(&(pid, executor));
        if let Some(&id) = self.by_value.get(&(pid, executor)) {
            self.forget(id);
        }
    }

    fn forget(&mut self, id: u64) {
        let Some((_, pid, values)) = self.phases.remove(&id) else {
            return;
        };
        for value in values {
            // A later first phase may have left the same value.
            if self.by_value.get(&(pid, value)) == Some(&id) {
                self.by_value.remove(&(pid, value));
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

    #[test]
    fn second_phases_find_their_first_by_executor() {
        let mut ops = Operators::default();
        ops.prepared(7, phase(1), vec![0x1000, 64]);
        ops.prepared(7, phase(2), vec![0x2000, 64]);
        assert_eq!(ops.ran(7, 0x2000).map(|p| p.correlation_id), Some(2));
        assert_eq!(ops.ran(7, 0x2000), None, "an executor runs once");
        assert_eq!(ops.ran(8, 0x1000), None, "another process");
        assert_eq!(ops.ran(7, 0x1000).map(|p| p.correlation_id), Some(1));
        assert_eq!(ops.ran(7, 0x3000), None, "a cache hit: no first phase");
    }

    #[test]
    fn repeatable_executors_keep_their_first_phase_until_destroyed() {
        let mut ops = Operators::default();
        ops.prepared(7, phase(1), vec![0x1000]);
        ops.set_repeatable(7, 0x1000);
        assert!(ops.ran(7, 0x1000).is_some());
        assert!(ops.ran(7, 0x1000).is_some());
        ops.destroyed(7, 0x1000);
        assert_eq!(ops.ran(7, 0x1000), None);
        assert!(ops.phases.is_empty() && ops.by_value.is_empty());
    }
}
