//! Property tests of the pipeline on hostile input: whatever bytes come out of the ring
//! buffer or a profiling channel, decoding and correlating them never panics, and every row
//! it makes is well formed. A seeded generator makes every run the same (a failure names
//! its seed); the bytes are random but steered into the shapes that reach deep paths: known
//! record kinds and probe ids, a few pids, tids and correlation ids so that entries, exits,
//! task submissions and completions meet.
use tracer_catalog::{CHIPS, ProbeTable};
use tracer_common::RecordKind;
use tracer_core::{
    correlate::{Correlator, FinalState},
    decode::{Decoded, Record, decode},
    soclog::{SocBatch, SocLogReader},
};

/// xorshift64*: small, deterministic, good enough to spread bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// The record kinds the BPF side writes.
fn kinds() -> Vec<u8> {
    (0..=u8::MAX)
        .filter(|&k| RecordKind::from_u8(k).is_some())
        .collect()
}

/// Random ring-buffer bytes: a known kind (mostly) and a length around its record's.
fn ring_bytes(rng: &mut Rng, kinds: &[u8]) -> Vec<u8> {
    let len = match rng.below(10) {
        0 => rng.below(16) as usize,
        _ => 64 + rng.below(4096) as usize,
    };
    let mut bytes = rng.bytes(len.max(1));
    if rng.below(20) != 0 {
        bytes[0] = kinds[rng.below(kinds.len() as u64) as usize];
    }
    bytes
}

/// Steers a decoded record's ids into a small space, so records of one call meet.
fn steer(rng: &mut Rng, record: &mut Record, clock: &mut u64, probes: usize) {
    *clock += rng.below(10_000);
    let pid = 100 + rng.below(3) as u32;
    let tid = pid + rng.below(3) as u32;
    let header = match record {
        Record::Enter(e) => {
            e.correlation_id = rng.below(64);
            e.parent_correlation_id = rng.below(64);
            &mut e.header
        }
        Record::Exit(e) => {
            e.correlation_id = rng.below(64);
            &mut e.header
        }
        Record::ThreadExit(h) => h,
        Record::OutScan(o) => {
            o.correlation_id = rng.below(64);
            &mut o.header
        }
        Record::TaskComplete(t) => {
            t.task_id = rng.below(32) as u32;
            t.stream_id = rng.below(4) as u16;
            t.device_id = rng.below(2) as u32;
            &mut t.header
        }
        Record::TaskSubmit(t) => {
            t.task_id = rng.below(32) as u32;
            t.stream_id = rng.below(4) as u16;
            t.device_id = rng.below(2) as u32;
            &mut t.header
        }
    };
    header.pid = pid;
    header.tid = tid;
    header.probe = rng.below(probes as u64 + 2) as u16;
    header.depth = rng.below(6) as u8;
    if rng.below(50) != 0 {
        header.ts_ns = *clock;
    }
}

/// One fuzz run: `records` ring-buffer records and channel chunks through a correlator of
/// every chip, then its end; checks every row it made.
fn run(seed: u64, records: usize) {
    let kinds = kinds();
    let probes = ProbeTable::builtin();
    for chip in CHIPS {
        let mut rng = Rng(seed | 1);
        let mut correlator = Correlator::new(Box::new(()), chip, probes.clone());
        let mut channels = [
            SocLogReader::new(chip.soc_log),
            SocLogReader::new(chip.soc_log),
        ];
        let mut clock = 1_000_000;
        let mut rows = 0;
        for i in 0..records {
            if let Ok(Decoded::Record(mut record)) = decode(&ring_bytes(&mut rng, &kinds)) {
                steer(&mut rng, &mut record, &mut clock, probes.len());
                correlator.push(&record, &mut ());
            }
            if rng.below(50) == 0 {
                let device = rng.below(2) as u32;
                let len = rng.below(512) as usize;
                let records = channels[device as usize].push(&rng.bytes(len));
                correlator.soc_batch(&SocBatch {
                    device,
                    read_ns: clock,
                    records,
                });
            }
            if i % 500 == 0 {
                rows += check(correlator.take_output());
            }
        }
        correlator.finish(
            &mut (),
            &FinalState {
                now_ns: clock,
                ..FinalState::default()
            },
        );
        rows += check(correlator.take_output());
        assert!(rows > 0, "seed {seed}: the run made no row at all");
    }
}

/// Rows are well formed: a call is incomplete exactly when it has no end (and then no
/// return value). Returns how many API rows there were.
fn check(output: tracer_core::correlate::Output) -> usize {
    for row in &output.api {
        assert_eq!(row.incomplete, row.end_ns.is_none(), "{row:?}");
        if row.incomplete {
            assert!(row.return_value.is_none(), "{row:?}");
        }
    }
    output.api.len()
}

#[test]
fn hostile_ring_buffer_and_channel_bytes_never_panic() {
    for seed in [1, 0x5eed, 0xdead_beef] {
        run(seed, 10_000);
    }
}
