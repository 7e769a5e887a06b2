//! The flows in progress on one connection of the engine transport: each run's place (the
//! number its step calls carry in `CallToken::flow`), its variables, and which runs wait to
//! send their next step (at once, or after a think time).
//!
//! A run holds its stream slot from its first step to its last: while it waits between
//! steps, the connection starts no other call in that slot, so `-c` counts flows in progress.

use std::time::Instant;

use crate::outcome::CallFailure;

/// One flow in progress.
#[derive(Debug)]
pub(super) struct FlowRun {
    /// Which of the run's flows (`LoadConfig::flows`).
    pub flow: u32,
    /// The step in flight, or the next one to send.
    pub step: u32,
    /// Its variables' values, by place (empty until a step extracts them).
    pub vars: Vec<String>,
    /// When the flow was scheduled to start (open loop).
    pub intended: Option<Instant>,
    /// When it started: the earlier of its schedule and its first step's send.
    pub started: Option<Instant>,
    /// Whether it counts (false during warmup).
    pub measured: bool,
    /// The first step that failed by its status, if any.
    pub failure: Option<CallFailure>,
    /// The first step whose reply failed its expectation otherwise, if any.
    pub unexpected: Option<String>,
}

/// The runs of one connection.
#[derive(Debug, Default)]
pub(super) struct FlowRuns {
    /// Runs by place; `None` is a free place.
    runs: Vec<Option<FlowRun>>,
    free: Vec<u32>,
    /// Runs waiting to send their next step, with the instant it may go (`None`: at once).
    ready: Vec<(Option<Instant>, u32)>,
    /// Runs in progress (in flight or waiting).
    active: usize,
}

impl FlowRuns {
    /// Whether any run is in progress.
    #[inline]
    pub fn is_active(&self) -> bool {
        self.active > 0
    }

    /// Runs waiting between steps: each holds a stream slot.
    pub fn waiting(&self) -> usize {
        self.ready.len()
    }

    /// Takes a place for `run`; returns its id (place + 1, never 0).
    pub fn start(&mut self, run: FlowRun) -> u32 {
        self.active += 1;
        match self.free.pop() {
            Some(place) => {
                self.runs[place as usize] = Some(run);
                place + 1
            }
            None => {
                self.runs.push(Some(run));
                self.runs.len() as u32
            }
        }
    }

    /// The run with this id.
    pub fn get_mut(&mut self, id: u32) -> Option<&mut FlowRun> {
        self.runs.get_mut(id.checked_sub(1)? as usize)?.as_mut()
    }

    /// The run is over: its place is freed.
    pub fn finish(&mut self, id: u32) -> Option<FlowRun> {
        let place = id.checked_sub(1)?;
        let run = self.runs.get_mut(place as usize)?.take()?;
        self.free.push(place);
        self.active -= 1;
        Some(run)
    }

    /// The run sends its next step at `at` (`None`: as soon as it is asked for).
    pub fn wait(&mut self, id: u32, at: Option<Instant>) {
        self.ready.push((at, id));
    }

    /// A waiting run whose next step may go now, taken out of the waiting ones; `now` is
    /// read only when some run waits for a time.
    pub fn due(&mut self, now: impl FnOnce() -> Instant) -> Option<u32> {
        let mut now = Some(now);
        let mut clock = None;
        let position = self.ready.iter().position(|(at, _)| match at {
            None => true,
            Some(at) => {
                let now =
                    *clock.get_or_insert_with(|| now.take().map_or_else(Instant::now, |f| f()));
                *at <= now
            }
        })?;
        Some(self.ready.swap_remove(position).1)
    }

    /// When the earliest waiting run may send its next step (`None`: none waits for a time).
    pub fn earliest(&self) -> Option<Instant> {
        self.ready.iter().filter_map(|(at, _)| *at).min()
    }

    /// Every run still in progress, taken out (the run ended before they did).
    pub fn take_all(&mut self) -> Vec<FlowRun> {
        self.ready.clear();
        self.free.clear();
        self.active = 0;
        self.runs.drain(..).flatten().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn run(flow: u32) -> FlowRun {
        FlowRun {
            flow,
            step: 0,
            vars: Vec::new(),
            intended: None,
            started: None,
            measured: true,
            failure: None,
            unexpected: None,
        }
    }

    #[test]
    fn places_are_reused_and_ids_never_zero() {
        let mut runs = FlowRuns::default();
        let a = runs.start(run(0));
        let b = runs.start(run(1));
        assert_eq!((a, b), (1, 2));
        assert_eq!(runs.finish(a).map(|r| r.flow), Some(0));
        assert!(runs.finish(a).is_none(), "a place is freed once");
        assert_eq!(runs.start(run(2)), 1);
        assert!(runs.get_mut(0).is_none());
        assert_eq!(runs.take_all().len(), 2);
        assert!(!runs.is_active());
    }

    #[test]
    fn a_run_waiting_for_a_time_is_due_only_then() {
        let mut runs = FlowRuns::default();
        let now = Instant::now();
        let later = runs.start(run(0));
        let at_once = runs.start(run(0));
        runs.wait(later, Some(now + Duration::from_secs(5)));
        runs.wait(at_once, None);
        assert_eq!(runs.due(|| now), Some(at_once));
        assert_eq!(runs.due(|| now), None);
        assert_eq!(runs.earliest(), Some(now + Duration::from_secs(5)));
        assert_eq!(runs.due(|| now + Duration::from_secs(5)), Some(later));
        assert_eq!(runs.waiting(), 0);
    }
}
