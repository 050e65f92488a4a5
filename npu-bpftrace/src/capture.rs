//! Capture control: when recording is on (`--delay`, SIGUSR1/SIGUSR2, `--capture-range`).
//!
//! Where it is decided: in the BPF programs, as each outermost call enters, so that nothing
//! outside a window is even written to the ring buffer and nothing is lost at a window's
//! edge. The agent pauses and resumes every process through `Config::paused` (`--delay`,
//! signals); mstx ranges open and close each process's own window in the kernel, since only
//! the kernel sees a range start at the instant it happens, and report each edge
//! (`WindowEdge`). This module keeps the windows for `session.json` and tells the session
//! when the last range it waits for has ended.
use std::collections::HashMap;

use anyhow::{Result, bail};
use tracer_common::{CaptureMatch, TEXT_LEN, WindowEdge};
use tracer_schema::session::{Capture, CaptureRange, CaptureWindow, WindowCause};

/// `--capture-range mstx:MESSAGE` with its `--capture-range-count`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeSpec {
    /// The message, without a trailing `*`.
    pub message: String,
    /// The message ended in `*`: ranges whose message starts with it match.
    pub prefix: bool,
    /// Windows each process opens at most.
    pub count: Option<u32>,
}

impl RangeSpec {
    /// Parses `mstx:MESSAGE` (`mstx:step*` for a prefix).
    pub fn parse(spec: &str, count: Option<u32>) -> Result<Self> {
        let Some(message) = spec.strip_prefix("mstx:") else {
            bail!("--capture-range: '{spec}' is not mstx:MESSAGE (e.g. mstx:step, mstx:'step *')");
        };
        let (message, prefix) = match message.strip_suffix('*') {
            Some(start) => (start, true),
            None => (message, false),
        };
        if message.is_empty() && !prefix {
            bail!("--capture-range: the message is empty (mstx:* matches every range)");
        }
        // Messages are compared on the bytes the probes copy: the longest that can still
        // tell a message from a longer one.
        if message.len() > TEXT_LEN - 2 {
            bail!(
                "--capture-range: the message is {} bytes; at most {} are compared",
                message.len(),
                TEXT_LEN - 2
            );
        }
        if count == Some(0) {
            bail!("--capture-range-count must be at least 1");
        }
        Ok(Self {
            message: message.to_owned(),
            prefix,
            count,
        })
    }

    /// What the BPF programs compare range messages with.
    pub fn bpf_match(&self) -> CaptureMatch {
        let mut text = [0u8; TEXT_LEN];
        text[..self.message.len()].copy_from_slice(self.message.as_bytes());
        CaptureMatch {
            len: self.message.len() as u32,
            prefix: u32::from(self.prefix),
            text,
        }
    }

    fn summary(&self) -> CaptureRange {
        CaptureRange {
            message: format!("{}{}", self.message, if self.prefix { "*" } else { "" }),
            count: self.count,
        }
    }
}

/// The windows of a session, as they open and close.
#[derive(Debug)]
pub struct Windows {
    capture: Capture,
    /// The open window of every process (recording not paused): its index.
    global: Option<usize>,
    /// Per process, its open mstx window's index.
    open: HashMap<u32, usize>,
    /// Per process, the mstx windows it closed.
    closed: HashMap<u32, u32>,
    ranges: bool,
    first_start_ns: Option<u64>,
}

impl Windows {
    /// A session that starts at `start_ns`, paused or recording.
    pub fn new(
        delay_ns: Option<u64>,
        range: Option<&RangeSpec>,
        start_ns: u64,
        paused: bool,
    ) -> Self {
        let mut windows = Self {
            capture: Capture {
                delay_ns,
                range: range.map(RangeSpec::summary),
                windows: Vec::new(),
            },
            global: None,
            open: HashMap::new(),
            closed: HashMap::new(),
            ranges: range.is_some(),
            first_start_ns: None,
        };
        if !paused {
            windows.resume(start_ns, WindowCause::Start);
        }
        windows
    }

    /// Whether recording is on (not paused).
    pub fn recording(&self) -> bool {
        self.global.is_some()
    }

    /// When recording first began: the first window of every process, or with a capture
    /// range the first range window. `--duration` counts from there.
    pub fn first_start_ns(&self) -> Option<u64> {
        self.first_start_ns
    }

    /// Recording resumes at `now_ns`; false when it was on already.
    pub fn resume(&mut self, now_ns: u64, cause: WindowCause) -> bool {
        if self.global.is_some() {
            return false;
        }
        self.global = Some(self.push(now_ns, cause, None));
        if !self.ranges {
            self.first_start_ns.get_or_insert(now_ns);
        }
        true
    }

    /// Recording pauses at `now_ns`; false when it was paused already.
    pub fn pause(&mut self, now_ns: u64, cause: WindowCause) -> bool {
        let Some(at) = self.global.take() else {
            return false;
        };
        self.close(at, now_ns, cause);
        true
    }

    /// An mstx window opened or closed (reported by the BPF programs).
    pub fn edge(&mut self, edge: &WindowEdge) {
        let (pid, ts) = (edge.header.pid, edge.header.ts_ns);
        if edge.open != 0 {
            if let Some(at) = self.open.remove(&pid) {
                // Its close was lost: it ended when the next opened at the latest.
                self.close(at, ts, WindowCause::MstxRange);
            }
            let at = self.push(ts, WindowCause::MstxRange, Some(edge));
            self.open.insert(pid, at);
            self.first_start_ns.get_or_insert(ts);
        } else {
            if let Some(at) = self.open.remove(&pid) {
                self.close(at, ts, WindowCause::MstxRange);
                let window = &mut self.capture.windows[at];
                window.range_id = Some(edge.range_id);
                window.tid = Some(edge.header.tid);
            }
            self.closed.insert(pid, edge.ranges);
        }
    }

    /// With at most `count` windows per process: whether every process that opened one has
    /// closed its last, or exited (`alive` says which still run).
    pub fn ranges_done(&self, count: u32, alive: impl Fn(u32) -> bool) -> bool {
        let pids: Vec<u32> = self
            .open
            .keys()
            .chain(self.closed.keys())
            .copied()
            .collect();
        !pids.is_empty()
            && pids
                .into_iter()
                .all(|pid| self.closed.get(&pid).is_some_and(|&n| n >= count) || !alive(pid))
    }

    /// The windows when the session stops at `stop_ns`: those still open end then.
    pub fn finish(mut self, stop_ns: u64) -> Capture {
        let open: Vec<usize> = self
            .global
            .take()
            .into_iter()
            .chain(self.open.drain().map(|(_, at)| at))
            .collect();
        for at in open {
            self.close(at, stop_ns, WindowCause::Stop);
        }
        self.capture
    }

    fn push(&mut self, start_ns: u64, cause: WindowCause, edge: Option<&WindowEdge>) -> usize {
        self.capture.windows.push(CaptureWindow {
            start_ns,
            end_ns: None,
            opened_by: cause,
            closed_by: None,
            pid: edge.map(|e| e.header.pid),
            tid: edge.map(|e| e.header.tid),
            range_id: None,
        });
        self.capture.windows.len() - 1
    }

    fn close(&mut self, at: usize, end_ns: u64, cause: WindowCause) {
        let window = &mut self.capture.windows[at];
        window.end_ns = Some(end_ns.max(window.start_ns));
        window.closed_by = Some(cause);
    }
}

#[cfg(test)]
mod tests {
    use tracer_common::{RecordHeader, RecordKind};

    use super::*;

    #[test]
    fn parses_ranges() {
        let spec = RangeSpec::parse("mstx:step", Some(3)).expect("valid");
        assert_eq!((spec.message.as_str(), spec.prefix), ("step", false));
        let m = spec.bpf_match();
        assert_eq!((m.len, m.prefix, &m.text[..5]), (4, 0, &b"step\0"[..]));
        let spec = RangeSpec::parse("mstx:step *", None).expect("prefix");
        assert_eq!((spec.message.as_str(), spec.prefix), ("step ", true));
        assert!(RangeSpec::parse("nvtx:step", None).is_err());
        assert!(RangeSpec::parse("mstx:", None).is_err());
        assert!(RangeSpec::parse("mstx:step", Some(0)).is_err());
        assert!(RangeSpec::parse(&format!("mstx:{}", "x".repeat(63)), None).is_err());
        assert!(RangeSpec::parse(&format!("mstx:{}", "x".repeat(62)), None).is_ok());
    }

    fn edge(pid: u32, ts_ns: u64, open: u32, ranges: u32) -> WindowEdge {
        WindowEdge {
            header: RecordHeader::new(RecordKind::Window, 0, 0, pid, pid, ts_ns),
            range_id: 7,
            open,
            ranges,
        }
    }

    #[test]
    fn global_windows_follow_pauses() {
        let mut w = Windows::new(Some(5), None, 100, true);
        assert!(!w.recording() && w.first_start_ns().is_none());
        assert!(w.resume(105, WindowCause::Delay));
        assert!(!w.resume(106, WindowCause::Sigusr1), "already on");
        assert!(w.pause(200, WindowCause::Sigusr2));
        assert!(w.resume(300, WindowCause::Sigusr1));
        let capture = w.finish(400);
        let spans: Vec<_> = capture
            .windows
            .iter()
            .map(|w| (w.start_ns, w.end_ns, w.opened_by, w.closed_by))
            .collect();
        use WindowCause::*;
        assert_eq!(
            spans,
            [
                (105, Some(200), Delay, Some(Sigusr2)),
                (300, Some(400), Sigusr1, Some(Stop))
            ]
        );
        assert_eq!(capture.delay_ns, Some(5));
    }

    #[test]
    fn range_windows_per_process() {
        let spec = RangeSpec::parse("mstx:step", Some(2)).expect("valid");
        let mut w = Windows::new(None, Some(&spec), 0, false);
        assert!(w.first_start_ns().is_none(), "no range yet");
        assert!(!w.ranges_done(2, |_| true), "nothing opened");
        w.edge(&edge(10, 5, 1, 0));
        w.edge(&edge(11, 6, 1, 0));
        w.edge(&edge(10, 8, 0, 1));
        assert_eq!(w.first_start_ns(), Some(5));
        w.edge(&edge(10, 9, 1, 1));
        w.edge(&edge(10, 12, 0, 2));
        assert!(!w.ranges_done(2, |_| true), "pid 11 is in its first");
        assert!(w.ranges_done(2, |pid| pid != 11), "unless it exited");
        let capture = w.finish(20);
        let mine: Vec<_> = capture
            .windows
            .iter()
            .filter(|w| w.pid == Some(10))
            .map(|w| (w.start_ns, w.end_ns, w.range_id))
            .collect();
        assert_eq!(mine, [(5, Some(8), Some(7)), (9, Some(12), Some(7))]);
        let other = capture
            .windows
            .iter()
            .find(|w| w.pid == Some(11))
            .expect("11");
        assert_eq!(
            (other.end_ns, other.closed_by),
            (Some(20), Some(WindowCause::Stop))
        );
        assert_eq!(capture.windows[0].opened_by, WindowCause::Start);
    }
}
