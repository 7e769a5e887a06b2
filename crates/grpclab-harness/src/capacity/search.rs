//! The rate search, as a pure state machine: grow the offered rate geometrically until a
//! probe breaks the SLO, then bisect between the highest rate that met it and the lowest that
//! did not, until they are within `precision` of each other. No I/O: the driver in
//! [`super`] runs each probe and reports whether it met the SLO.

/// How the search moves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchPlan {
    /// The first rate probed, req/s.
    pub start: f64,
    /// The highest rate probed, req/s: reaching it with the SLO met ends the search.
    pub max: f64,
    /// The lowest rate probed when even the start breaks the SLO.
    pub floor: f64,
    /// Factor between rates while growing (and shrinking, when the start already fails).
    pub growth: f64,
    /// Bisection ends when the lowest failing rate is within this fraction above the
    /// highest passing one (0.05: the answer is known to 5 %).
    pub precision: f64,
    /// Most probes (repeats not counted).
    pub max_probes: usize,
}

/// Why the search ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// The capacity lies between the highest pass and the lowest fail, within the precision.
    Converged,
    /// The SLO held at the plan's highest rate.
    MaxRate,
    /// The SLO broke even at the floor rate.
    BrokenAtFloor,
    /// The probe budget ran out before the precision was reached.
    ProbeBudget,
}

impl Stop {
    /// In words, for the report.
    pub fn describe(self, plan: &SearchPlan) -> String {
        match self {
            Stop::Converged => format!(
                "converged: the highest rate that met the SLO and the lowest that did not are within {:.0} %",
                plan.precision * 100.0
            ),
            Stop::MaxRate => format!(
                "the SLO held at the highest rate asked for ({:.0} req/s, --max-rps): the capacity is at least that",
                plan.max
            ),
            Stop::BrokenAtFloor => format!(
                "the SLO broke even at {:.1} req/s: no rate tried meets it",
                plan.floor
            ),
            Stop::ProbeBudget => format!(
                "the probe budget ({}) ran out before the bounds came within {:.0} %",
                plan.max_probes,
                plan.precision * 100.0
            ),
        }
    }
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    /// Probe this rate.
    Probe(f64),
    /// The search is over.
    Stop(Stop),
}

/// The search's state.
#[derive(Debug, Clone)]
pub struct Search {
    plan: SearchPlan,
    /// The highest rate that met the SLO.
    pub highest_pass: Option<f64>,
    /// The lowest rate that broke it.
    pub lowest_fail: Option<f64>,
    probes: usize,
}

impl Search {
    /// A search that starts at `plan.start`.
    pub fn new(plan: SearchPlan) -> Search {
        Search {
            plan,
            highest_pass: None,
            lowest_fail: None,
            probes: 0,
        }
    }

    /// The first rate to probe.
    pub fn first(&self) -> f64 {
        self.plan.start.clamp(self.plan.floor, self.plan.max)
    }

    /// Records a probe's verdict at `rate` and says what comes next.
    pub fn record(&mut self, rate: f64, passed: bool) -> Next {
        self.probes += 1;
        if passed {
            self.highest_pass = Some(self.highest_pass.map_or(rate, |r| r.max(rate)));
        } else {
            self.lowest_fail = Some(self.lowest_fail.map_or(rate, |r| r.min(rate)));
        }
        let next = match (self.highest_pass, self.lowest_fail) {
            (Some(pass), None) => {
                if pass >= self.plan.max {
                    return Next::Stop(Stop::MaxRate);
                }
                (pass * self.plan.growth).min(self.plan.max)
            }
            (None, Some(fail)) => {
                if fail <= self.plan.floor {
                    return Next::Stop(Stop::BrokenAtFloor);
                }
                (fail / self.plan.growth).max(self.plan.floor)
            }
            (Some(pass), Some(fail)) => {
                // A failure below a pass (noise at the edge): the bounds cross; the lower
                // failure wins and the search continues below it.
                if fail <= pass {
                    self.highest_pass = None;
                    return self.record_again(fail);
                }
                if fail <= pass * (1.0 + self.plan.precision) {
                    return Next::Stop(Stop::Converged);
                }
                (pass + fail) / 2.0
            }
            (None, None) => self.first(),
        };
        if self.probes >= self.plan.max_probes {
            return Next::Stop(Stop::ProbeBudget);
        }
        Next::Probe(next)
    }

    /// Continues below `fail` after crossed bounds.
    fn record_again(&mut self, fail: f64) -> Next {
        if self.probes >= self.plan.max_probes {
            return Next::Stop(Stop::ProbeBudget);
        }
        if fail <= self.plan.floor {
            return Next::Stop(Stop::BrokenAtFloor);
        }
        Next::Probe((fail / self.plan.growth).max(self.plan.floor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> SearchPlan {
        SearchPlan {
            start: 100.0,
            max: 1.0e6,
            floor: 1.0,
            growth: 2.0,
            precision: 0.05,
            max_probes: 40,
        }
    }

    /// Runs a search against a server that meets the SLO below `capacity` exactly.
    fn run(plan: SearchPlan, capacity: f64) -> (Search, Stop, Vec<f64>) {
        let mut search = Search::new(plan);
        let mut rate = search.first();
        let mut rates = Vec::new();
        loop {
            rates.push(rate);
            match search.record(rate, rate <= capacity) {
                Next::Probe(next) => rate = next,
                Next::Stop(stop) => return (search, stop, rates),
            }
        }
    }

    #[test]
    fn a_cliff_is_found_to_the_precision() {
        for capacity in [150.0, 999.0, 1000.0, 12_345.0, 333_333.0] {
            let (search, stop, rates) = run(plan(), capacity);
            assert_eq!(stop, Stop::Converged, "{capacity}: {rates:?}");
            let (pass, fail) = (search.highest_pass.unwrap(), search.lowest_fail.unwrap());
            assert!(
                pass <= capacity && fail > capacity,
                "{pass}..{fail} vs {capacity}"
            );
            assert!(fail <= pass * 1.05, "{pass}..{fail}");
            // Doubling to the cliff, then about log2(1/precision) halvings.
            assert!(
                rates.len() <= 20,
                "{capacity}: {} probes {rates:?}",
                rates.len()
            );
        }
    }

    #[test]
    fn a_start_above_capacity_walks_down() {
        let (search, stop, rates) = run(
            SearchPlan {
                start: 50_000.0,
                ..plan()
            },
            700.0,
        );
        assert_eq!(stop, Stop::Converged, "{rates:?}");
        assert!(rates[1] < rates[0], "{rates:?}");
        assert!(search.highest_pass.unwrap() <= 700.0);
    }

    #[test]
    fn the_ends_are_named() {
        let (_, stop, rates) = run(plan(), 1.0e9);
        assert_eq!(stop, Stop::MaxRate);
        assert_eq!(*rates.last().unwrap(), 1.0e6);
        let (_, stop, _) = run(plan(), 0.5);
        assert_eq!(stop, Stop::BrokenAtFloor);
        let (_, stop, rates) = run(
            SearchPlan {
                max_probes: 5,
                ..plan()
            },
            5_000.0,
        );
        assert_eq!(stop, Stop::ProbeBudget);
        assert_eq!(rates.len(), 5);
        assert!(Stop::Converged.describe(&plan()).contains("within 5 %"));
    }

    #[test]
    fn noise_that_crosses_the_bounds_continues_below_the_failure() {
        let mut search = Search::new(plan());
        assert_eq!(search.record(100.0, true), Next::Probe(200.0));
        assert_eq!(search.record(200.0, false), Next::Probe(150.0));
        // 150 fails, then a repeat at 120 passes, then 140 fails: fine. But a failure at a
        // rate below a recorded pass means the pass was luck: search below the failure.
        assert_eq!(search.record(150.0, false), Next::Probe(125.0));
        match search.record(90.0, false) {
            Next::Probe(rate) => assert!(rate < 90.0, "{rate}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(search.highest_pass, None);
    }
}
