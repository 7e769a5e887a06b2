//! A new run against the previous run of its configuration: the change of each headline
//! figure, and whether it is beyond that configuration's usual spread.
//!
//! The usual spread is the mean ± 2 standard deviations of the last [`SPREAD_RUNS`] runs of
//! the configuration (at least [`MIN_SPREAD_RUNS`] of them; with fewer nobody knows the
//! spread yet and the verdict says so). Runs of one configuration on one machine scatter
//! by the machine's noise; a change inside that band is not news.

use serde::{Deserialize, Serialize};

/// The figures judged, in this order: req/s, p99 (ns), CPU per call (ns).
pub const METRICS: [&str; 3] = ["req/s", "p99", "cpu/call"];

/// A run's judged figures, in [`METRICS`]' order (`None`: not measured).
pub type Figures = [Option<f64>; 3];

/// An earlier run of the same configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct EarlierRun {
    /// Its id in the store.
    pub id: i64,
    /// When it started.
    pub started_at: String,
    /// Its figures.
    pub figures: Figures,
}

/// Where a run was stored and how it compares with the previous run of its configuration:
/// what every report of the run shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredNote {
    /// The run's id in the store.
    pub id: i64,
    /// The store (a path, or a URL without its password).
    pub store: String,
    /// Against the previous run of the same configuration; `None` for the first.
    pub against: Option<Previous>,
}

impl StoredNote {
    /// "stored as run 42; against run 41: ..." (or "the first of its configuration").
    pub fn sentence(&self) -> String {
        match &self.against {
            Some(previous) => format!("stored as run {}; {}", self.id, previous.sentence()),
            None => format!(
                "stored as run {}; the first run of its configuration",
                self.id
            ),
        }
    }
}

/// How many earlier runs make the usual spread.
pub const SPREAD_RUNS: usize = 10;
/// Fewer earlier runs than this and the spread is unknown.
pub const MIN_SPREAD_RUNS: usize = 3;

/// The run against the previous one of its configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Previous {
    /// The previous run's id.
    pub id: i64,
    /// When it started.
    pub started_at: String,
    /// How many earlier runs the spread was taken over.
    pub spread_runs: usize,
    /// One entry per figure both runs measured.
    pub changes: Vec<Change>,
}

/// One figure against the previous run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// `req/s`, `p99` or `cpu/call`.
    pub metric: String,
    /// The previous run's value (nanoseconds for times).
    pub previous: f64,
    /// This run's value.
    pub now: f64,
    /// (now − previous) / previous, percent.
    pub change_percent: f64,
    /// The usual band (mean ± 2 sd of the earlier runs), when enough runs are known.
    pub usual: Option<(f64, f64)>,
    /// Whether `now` lies outside the usual band (`None`: too few runs to know).
    pub beyond: Option<bool>,
}

impl Previous {
    /// `figures` against `earlier` (oldest first; the last is the previous run), or `None`
    /// for the first run of a configuration.
    pub fn of(figures: &Figures, earlier: &[EarlierRun]) -> Option<Previous> {
        let last = earlier.last()?;
        let window = &earlier[earlier.len().saturating_sub(SPREAD_RUNS)..];
        let changes = METRICS
            .iter()
            .enumerate()
            .filter_map(|(index, name)| {
                let now = figures[index]?;
                let previous = last.figures[index]?;
                let history: Vec<f64> =
                    window.iter().filter_map(|run| run.figures[index]).collect();
                let usual = band(&history);
                Some(Change {
                    metric: (*name).to_owned(),
                    previous,
                    now,
                    change_percent: if previous != 0.0 {
                        (now - previous) / previous * 100.0
                    } else {
                        0.0
                    },
                    usual,
                    beyond: usual.map(|(low, high)| now < low || now > high),
                })
            })
            .collect();
        Some(Previous {
            id: last.id,
            started_at: last.started_at.clone(),
            spread_runs: window.len(),
            changes,
        })
    }

    /// One sentence: "against run 41: req/s +2.1 % (within its usual spread), ...".
    pub fn sentence(&self) -> String {
        let parts: Vec<String> = self.changes.iter().map(Change::words).collect();
        if parts.is_empty() {
            return format!("against run {}: no figure in common", self.id);
        }
        format!("against run {}: {}", self.id, parts.join(", "))
    }

    /// Whether any figure moved beyond its usual spread.
    pub fn any_beyond(&self) -> bool {
        self.changes
            .iter()
            .any(|change| change.beyond == Some(true))
    }
}

impl Change {
    /// "req/s +2.1 % (beyond its usual spread 980-1,020)".
    pub fn words(&self) -> String {
        let verdict = match self.beyond {
            Some(true) => "BEYOND its usual spread",
            Some(false) => "within its usual spread",
            None => "too few runs to know its spread",
        };
        format!("{} {:+.1} % ({verdict})", self.metric, self.change_percent)
    }
}

/// Mean ± 2 sample standard deviations, from at least [`MIN_SPREAD_RUNS`] values.
fn band(values: &[f64]) -> Option<(f64, f64)> {
    if values.len() < MIN_SPREAD_RUNS {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let spread = 2.0 * variance.sqrt();
    Some((mean - spread, mean + spread))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: i64, rps: f64) -> EarlierRun {
        EarlierRun {
            id,
            started_at: format!("t{id}"),
            figures: figures(rps),
        }
    }

    fn figures(rps: f64) -> Figures {
        [Some(rps), None, None]
    }

    #[test]
    fn the_first_run_has_nothing_to_be_against() {
        assert_eq!(Previous::of(&figures(1.0), &[]), None);
    }

    #[test]
    fn with_few_runs_the_spread_is_unknown() {
        let previous = Previous::of(&figures(110.0), &[run(1, 100.0)]).expect("a previous run");
        assert_eq!(previous.id, 1);
        assert_eq!(previous.changes[0].change_percent, 10.0);
        assert_eq!(previous.changes[0].beyond, None);
        assert!(previous.sentence().contains("too few runs"));
    }

    #[test]
    fn a_change_inside_the_noise_is_not_news_and_one_outside_is() {
        let earlier: Vec<EarlierRun> = [100.0, 104.0, 96.0, 102.0, 98.0]
            .iter()
            .enumerate()
            .map(|(i, rps)| run(i as i64 + 1, *rps))
            .collect();
        let within = Previous::of(&figures(103.0), &earlier).expect("previous");
        assert_eq!(within.changes[0].beyond, Some(false));
        assert!(!within.any_beyond());
        let beyond = Previous::of(&figures(130.0), &earlier).expect("previous");
        assert_eq!(beyond.changes[0].beyond, Some(true));
        assert_eq!(beyond.id, 5);
        assert!(beyond.sentence().contains("BEYOND"));
    }
}
