//! Writing the records read: JSON lines or CSV, one record per line, in the order read.
use std::collections::BTreeMap;
use std::io::Write;

use npu_sim_common::abi::{
    Chip, STARS_SOC_LOG_SIZE, STARS_SOC_LOG_V6_SIZE, StarsSocLog, StarsSocLogV6,
};
use npu_sim_common::json::Obj;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Format {
    JsonLines,
    Csv,
}

const CSV_HEADER: &str =
    "device,func_type,task_type,stream,task,timestamp,stream_id_raw,task_id_raw,acsq_id\n";

/// One decoded record.
struct Rec {
    func_type: u8,
    task_type: u8,
    stream: u16,
    task: u32,
    timestamp: u64,
    raw_stream: u16,
    raw_task: u32,
    acsq: u16,
}

/// Record sink that also reassembles records split across reads.
pub(crate) struct Writer {
    out: Box<dyn Write>,
    format: Format,
    /// Which record format the channel carries (msPTI `SocLogConvert::GetTransFunc`).
    chip: Chip,
    /// Bytes of a record whose rest has not been read yet, per device.
    partial: Vec<(u32, Vec<u8>)>,
    /// Records written, per device.
    records: BTreeMap<u32, u64>,
}

impl Writer {
    pub(crate) fn new(
        mut out: Box<dyn Write>,
        format: Format,
        chip: Chip,
    ) -> std::io::Result<Writer> {
        if format == Format::Csv {
            out.write_all(CSV_HEADER.as_bytes())?;
        }
        Ok(Writer {
            out,
            format,
            chip,
            partial: Vec::new(),
            records: BTreeMap::new(),
        })
    }

    /// Takes `bytes` read from `device`'s channel and writes every record they complete.
    pub(crate) fn feed(&mut self, device: u32, bytes: &[u8]) -> std::io::Result<()> {
        let mut data = match self.partial.iter().position(|(d, _)| *d == device) {
            Some(i) => self.partial.swap_remove(i).1,
            None => Vec::new(),
        };
        data.extend_from_slice(bytes);
        let size = match self.chip {
            Chip::Ascend910B => STARS_SOC_LOG_SIZE,
            Chip::Ascend950 => STARS_SOC_LOG_V6_SIZE,
        };
        let whole = data.len() / size * size;
        for chunk in data[..whole].chunks_exact(size) {
            let rec = match self.chip {
                Chip::Ascend910B => {
                    let mut raw = [0u8; STARS_SOC_LOG_SIZE];
                    raw.copy_from_slice(chunk);
                    let r = StarsSocLog::from_bytes(&raw);
                    let (stream, task) = r.ids();
                    Rec {
                        func_type: r.func_type(),
                        task_type: r.task_type(),
                        stream,
                        task: task.into(),
                        timestamp: r.timestamp,
                        raw_stream: r.stream_id,
                        raw_task: r.task_id.into(),
                        acsq: r.acsq_id(),
                    }
                }
                Chip::Ascend950 => {
                    let mut raw = [0u8; STARS_SOC_LOG_V6_SIZE];
                    raw.copy_from_slice(chunk);
                    let r = StarsSocLogV6::from_bytes(&raw);
                    // No stream id: msPTI uses 0 (`TransSocLogV6`).
                    Rec {
                        func_type: r.func_type(),
                        task_type: r.task_type(),
                        stream: 0,
                        task: r.task_id,
                        timestamp: r.timestamp,
                        raw_stream: 0,
                        raw_task: r.task_id,
                        acsq: r.acsq_id(),
                    }
                }
            };
            self.write(device, &rec)?;
        }
        if whole < data.len() {
            self.partial.push((device, data[whole..].to_vec()));
        }
        Ok(())
    }

    /// Records of `device` written so far.
    pub(crate) fn records(&self, device: u32) -> u64 {
        self.records.get(&device).copied().unwrap_or(0)
    }

    /// Bytes left over from an incomplete record (none once a channel is drained).
    pub(crate) fn leftover(&self) -> usize {
        self.partial.iter().map(|(_, b)| b.len()).sum()
    }

    fn write(&mut self, device: u32, r: &Rec) -> std::io::Result<()> {
        *self.records.entry(device).or_default() += 1;
        let line = match self.format {
            Format::Csv => format!(
                "{device},{},{},{},{},{},{},{},{}\n",
                r.func_type,
                r.task_type,
                r.stream,
                r.task,
                r.timestamp,
                r.raw_stream,
                r.raw_task,
                r.acsq
            ),
            Format::JsonLines => {
                let mut s = String::with_capacity(200);
                let mut o = Obj::begin(&mut s);
                o.u64("device", device.into())
                    .u64("func_type", r.func_type.into())
                    .u64("task_type", r.task_type.into());
                o.u64("stream", r.stream.into())
                    .u64("task", r.task.into())
                    .u64("timestamp", r.timestamp);
                o.u64("stream_id_raw", r.raw_stream.into())
                    .u64("task_id_raw", r.raw_task.into())
                    .u64("acsq_id", r.acsq.into());
                o.end();
                s.push('\n');
                s
            }
        };
        self.out.write_all(line.as_bytes())
    }

    pub(crate) fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A `Write` whose bytes the test can look at afterwards.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn records_split_across_reads_are_reassembled() {
        let sink = Shared::default();
        let mut w = Writer::new(Box::new(sink.clone()), Format::Csv, Chip::Ascend910B).unwrap();
        let rec = StarsSocLog {
            word0: 1 | (11 << 10),
            stream_id: 0x1000 | 0x2000 | 3,
            task_id: 5,
            timestamp: 99,
            acc: 3 << 6,
            ..Default::default()
        }
        .to_bytes();
        w.feed(0, &rec[..10]).unwrap();
        assert_eq!(w.records(0), 0);
        w.feed(0, &rec[10..]).unwrap();
        assert_eq!((w.records(0), w.leftover()), (1, 0));
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            text.lines().nth(1),
            Some("0,1,11,3,8197,99,12291,5,3"),
            "bit 12 form: task 0x2005"
        );
    }
}
