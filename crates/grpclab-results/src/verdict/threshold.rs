//! Thresholds: `METRIC OP VALUE`, e.g. `p99<=10ms`, `avg<2.5ms`, `errors<=0.1%`,
//! `errors==0`, `rps>=5000`.
//!
//! Metrics: latency percentiles `pN` (N from 0 to 100, fractions allowed: `p99.9`), `avg`,
//! `min`, `max` — over successful calls, as the summary's figures (all calls with
//! `--count-errors`) — compared with a duration (`ns`, `us`/`µs`, `ms`, `s`; decimals
//! allowed); `errors`, the failed share of the calls (`0.1%`), or their count (`5`); `rps`,
//! calls per second over the measured window. Operators: `<`, `<=`, `>`, `>=`, `==`.
//! A latency threshold on a run without one successful call fails: nothing met it.
//!
//! In a mix (`--mix`, `--workload`), `METHOD:METRIC OP VALUE` reads one method's calls
//! (`Greeter.SayHello:p99<=10ms`): a slow method is not hidden behind a fast majority.
//! METHOD is the full name or any unique dotted tail of it (`SayHello`).

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use grpclab_core::InputError;

/// What a threshold measures.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Metric {
    /// A latency percentile (0..=100).
    Percentile(f64),
    /// Mean latency.
    Average,
    /// Fastest call.
    Min,
    /// Slowest call.
    Max,
    /// Failed calls as a share of all (a fraction: 0.001 is 0.1 %).
    ErrorShare,
    /// Failed calls.
    ErrorCount,
    /// Calls per second over the measured window.
    Rps,
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
    Equal,
}

impl Op {
    fn holds(self, actual: f64, limit: f64) -> bool {
        match self {
            Op::Less => actual < limit,
            Op::LessOrEqual => actual <= limit,
            Op::Greater => actual > limit,
            Op::GreaterOrEqual => actual >= limit,
            Op::Equal => actual == limit,
        }
    }
}

/// One parsed threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// As typed (without spaces), for messages and reports.
    pub expression: String,
    metric: Metric,
    op: Op,
    /// In the metric's unit: nanoseconds, a fraction, a count, or calls per second.
    limit: f64,
    /// `METHOD:...`: the mix method whose calls it reads (its full name once resolved by
    /// [`Threshold::resolve_method`]); `None`: the whole run.
    method: Option<String>,
}

/// A threshold judged against a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThresholdVerdict {
    /// The threshold, as typed.
    pub expression: String,
    /// The run's figure, as the threshold reads it ("2.31 ms", "0.05 %", "12345.6 req/s"), or
    /// why there is none.
    pub actual: String,
    /// Whether the run met it.
    pub passed: bool,
}

/// What a threshold reads from a run.
#[derive(Debug, Clone, Copy)]
pub struct RunFigures<'a> {
    /// Latency of the calls the summary describes (successful ones, or all with
    /// `--count-errors`), in nanoseconds.
    pub latency: &'a Histogram<u64>,
    /// Calls measured.
    pub count: u64,
    /// Of them, failed.
    pub errors: u64,
    /// Calls per second over the measured window.
    pub rps: f64,
    /// Each method of a mix (empty otherwise), for thresholds on one method.
    pub methods: &'a [MethodFigures<'a>],
}

/// One method of a mix as a threshold reads it.
#[derive(Debug, Clone, Copy)]
pub struct MethodFigures<'a> {
    /// Its full name (`package.Service.Method`).
    pub name: &'a str,
    /// Its calls' figures (`methods` empty).
    pub figures: RunFigures<'a>,
}

impl<'a> MethodFigures<'a> {
    /// Method `name`'s figures: its calls' `latency`, `count`, `errors` and `rps`.
    pub fn new(
        name: &'a str,
        latency: &'a Histogram<u64>,
        count: u64,
        errors: u64,
        rps: f64,
    ) -> MethodFigures<'a> {
        MethodFigures {
            name,
            figures: RunFigures {
                latency,
                count,
                errors,
                rps,
                methods: &[],
            },
        }
    }
}

const HELP: &str = "write METRIC OP VALUE, e.g. 'p99<=10ms', 'avg<2ms', 'errors<=0.1%', 'errors==0', 'rps>=5000' (metrics: pN, avg, min, max, errors, rps; operators: < <= > >= ==)";

impl Threshold {
    /// Parses one `--threshold`.
    pub fn parse(text: &str) -> Result<Threshold, InputError> {
        let expression: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let refuse = |why: &str| InputError(format!("--threshold '{text}': {why}; {HELP}"));
        let at = expression
            .find(['<', '>', '='])
            .ok_or_else(|| refuse("no comparison"))?;
        let (name, rest) = expression.split_at(at);
        let (method, name) = match name.rsplit_once(':') {
            Some(("", _)) => return Err(refuse("no method before ':'")),
            Some((method, name)) => (Some(method.to_owned()), name),
            None => (None, name),
        };
        let (op, value) = [
            ("<=", Op::LessOrEqual),
            (">=", Op::GreaterOrEqual),
            ("==", Op::Equal),
            ("<", Op::Less),
            (">", Op::Greater),
        ]
        .iter()
        .find_map(|(symbol, op)| rest.strip_prefix(symbol).map(|value| (*op, value)))
        .ok_or_else(|| refuse("'=' alone is no comparison (use ==)"))?;
        if value.is_empty() {
            return Err(refuse("no value after the comparison"));
        }
        let name = name.to_ascii_lowercase();
        let (metric, limit) = match name.as_str() {
            "" => return Err(refuse("no metric before the comparison")),
            "avg" | "mean" => (Metric::Average, duration_ns(value).map_err(|e| refuse(&e))?),
            "min" => (Metric::Min, duration_ns(value).map_err(|e| refuse(&e))?),
            "max" => (Metric::Max, duration_ns(value).map_err(|e| refuse(&e))?),
            "rps" | "req/s" => (Metric::Rps, number(value).map_err(|e| refuse(&e))?),
            "errors" => match value.strip_suffix('%') {
                Some(percent) => {
                    let percent = number(percent).map_err(|e| refuse(&e))?;
                    if percent > 100.0 {
                        return Err(refuse("a share of the calls is at most 100%"));
                    }
                    (Metric::ErrorShare, percent / 100.0)
                }
                None => (Metric::ErrorCount, number(value).map_err(|e| refuse(&e))?),
            },
            percentile if percentile.starts_with('p') => {
                let p = number(&percentile[1..]).map_err(|_| {
                    refuse(&format!("'{name}' is not a percentile (p50, p99, p99.9)"))
                })?;
                if p > 100.0 {
                    return Err(refuse("a percentile is at most p100"));
                }
                (
                    Metric::Percentile(p),
                    duration_ns(value).map_err(|e| refuse(&e))?,
                )
            }
            other => return Err(refuse(&format!("unknown metric '{other}'"))),
        };
        Ok(Threshold {
            expression,
            metric,
            op,
            limit,
            method,
        })
    }

    /// Names the method of a `METHOD:` threshold by its full name, among the mix's `methods`
    /// (full names; empty when the run is no mix): the full name itself or a unique dotted
    /// tail of one (`SayHello`, `Greeter.SayHello`). `flag` names the option in the refusal.
    pub fn resolve_method(&mut self, methods: &[&str], flag: &str) -> Result<(), InputError> {
        let Some(given) = &self.method else {
            return Ok(());
        };
        let refuse = |why: String| InputError(format!("{flag} '{}': {why}", self.expression));
        if methods.is_empty() {
            return Err(refuse(format!(
                "a method's threshold ('{given}:') reads one method of a mix (--mix, --workload); this run calls one method: leave '{given}:' out"
            )));
        }
        let matches: Vec<&str> = methods
            .iter()
            .copied()
            .filter(|full| {
                *full == given.as_str()
                    || full
                        .strip_suffix(given.as_str())
                        .is_some_and(|head| head.ends_with('.'))
            })
            .collect();
        match matches.as_slice() {
            [one] => {
                self.method = Some((*one).to_owned());
                Ok(())
            }
            [] => Err(refuse(format!(
                "'{given}' is no method of the mix; its methods: {}",
                methods.join(", ")
            ))),
            several => Err(refuse(format!(
                "'{given}' names several methods of the mix ({}); give more of the name",
                several.join(", ")
            ))),
        }
    }

    /// The mix method it reads (its full name once resolved); `None`: the whole run.
    pub fn method(&self) -> Option<&str> {
        self.method.as_deref()
    }

    /// The figures it reads: its method's, or the whole run's; `None` when its method made
    /// no call the run recorded.
    fn scope<'b>(&self, run: &'b RunFigures<'b>) -> Option<&'b RunFigures<'b>> {
        match &self.method {
            None => Some(run),
            Some(name) => run
                .methods
                .iter()
                .find(|method| method.name == name.as_str())
                .map(|method| &method.figures),
        }
    }

    /// Whether it reads the throughput (`rps`): a condition on the outcome, not a service
    /// level a rate can be searched against.
    pub fn is_throughput(&self) -> bool {
        self.metric == Metric::Rps
    }

    /// The fewest measured calls that make the figure this threshold reads trustworthy:
    /// 100 calls beyond a percentile (10,000 for p99, 100,000 for p99.9); 10 failures at an
    /// error-share limit (10,000 calls for 0.1 %); 1,000 for a mean, min, max or count.
    /// Capacity probes run at least this many calls (within their time limit).
    pub fn calls_needed(&self) -> u64 {
        const FLOOR: u64 = 1_000;
        const CEILING: u64 = 1_000_000;
        let needed = match self.metric {
            Metric::Percentile(p) if p < 100.0 => (100.0 / (1.0 - p / 100.0)).ceil() as u64,
            Metric::Percentile(_) | Metric::Max => 10_000,
            Metric::ErrorShare if self.limit > 0.0 => (10.0 / self.limit).ceil() as u64,
            Metric::ErrorShare => 10_000,
            _ => FLOOR,
        };
        needed.clamp(FLOOR, CEILING)
    }

    /// The figure this threshold reads from a run (nanoseconds, a fraction, a count or
    /// calls per second), `None` when the run has none.
    pub fn actual(&self, run: &RunFigures<'_>) -> Option<f64> {
        let run = self.scope(run)?;
        let latency = |pick: &dyn Fn(&Histogram<u64>) -> u64| {
            (!run.latency.is_empty()).then(|| pick(run.latency) as f64)
        };
        match self.metric {
            Metric::Percentile(p) => latency(&|h| h.value_at_quantile(p / 100.0)),
            Metric::Average => latency(&|h| h.mean() as u64),
            Metric::Min => latency(&|h| h.min()),
            Metric::Max => latency(&|h| h.max()),
            Metric::ErrorShare => (run.count > 0).then(|| run.errors as f64 / run.count as f64),
            Metric::ErrorCount => Some(run.errors as f64),
            Metric::Rps => Some(run.rps),
        }
    }

    /// Whether a run's figure lies within `tolerance` (a fraction) of the limit, where one
    /// run's verdict is as likely noise as not.
    pub fn near_limit(&self, run: &RunFigures<'_>, tolerance: f64) -> bool {
        match self.actual(run) {
            Some(actual) if self.limit > 0.0 => {
                (actual - self.limit).abs() <= tolerance * self.limit
            }
            _ => false,
        }
    }

    /// Judges the run.
    pub fn judge(&self, run: &RunFigures<'_>) -> ThresholdVerdict {
        let Some(actual) = self.actual(run) else {
            return ThresholdVerdict {
                expression: self.expression.clone(),
                actual: match (self.metric, self.scope(run)) {
                    (_, None) => "no call of this method".to_owned(),
                    (Metric::ErrorShare, _) => "no call ended".to_owned(),
                    _ => "no successful call".to_owned(),
                },
                passed: false,
            };
        };
        let shown = match self.metric {
            Metric::ErrorShare => format!("{:.3} %", actual * 100.0),
            Metric::ErrorCount => format!("{actual:.0} errors"),
            Metric::Rps => format!("{actual:.1} req/s"),
            _ => format!("{:.3} ms", actual / 1e6),
        };
        ThresholdVerdict {
            expression: self.expression.clone(),
            actual: shown,
            passed: self.op.holds(actual, self.limit),
        }
    }
}

/// A non-negative finite number.
fn number(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if value.is_finite() && value >= 0.0 => Ok(value),
        _ => Err(format!("'{text}' is not a number (0 or more)")),
    }
}

/// A duration with its unit, decimals allowed (`2.5ms`), in nanoseconds.
fn duration_ns(text: &str) -> Result<f64, String> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("'{text}' has no unit; write e.g. '{text}ms'"))?;
    let (value, unit) = text.split_at(split);
    let value = number(value)?;
    let scale = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        other => return Err(format!("unknown unit '{other}' (ns, us, ms, s)")),
    };
    Ok(value * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values_ms: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
        for v in values_ms {
            h.record(v * 1_000_000).unwrap();
        }
        h
    }

    fn verdict(expression: &str, run: &RunFigures<'_>) -> ThresholdVerdict {
        Threshold::parse(expression).unwrap().judge(run)
    }

    #[test]
    fn thresholds_judge_latency_errors_and_throughput() {
        let latency = histogram(&(1..=100).collect::<Vec<_>>());
        let run = RunFigures {
            latency: &latency,
            count: 1000,
            errors: 1,
            rps: 5000.0,
            methods: &[],
        };
        assert!(verdict("p99<=100ms", &run).passed);
        assert!(!verdict("p99 < 50ms", &run).passed);
        assert!(verdict("p50<=50.1ms", &run).passed);
        assert!(verdict("avg<60ms", &run).passed);
        assert!(!verdict("max<100ms", &run).passed);
        // 3 significant digits: 1 ms is kept as a value within 0.1 % of it.
        assert!(verdict("min>=0.999ms", &run).passed);
        assert!(verdict("errors<=0.1%", &run).passed);
        assert!(!verdict("errors<0.1%", &run).passed);
        assert!(!verdict("errors==0", &run).passed);
        assert!(verdict("rps>=5000", &run).passed);
        assert!(!verdict("rps>5000", &run).passed);
        assert_eq!(verdict("errors<=0.1%", &run).actual, "0.100 %");
        // No successful call: every latency threshold fails, saying why.
        let empty = histogram(&[]);
        let failed = RunFigures {
            latency: &empty,
            count: 50,
            errors: 50,
            rps: 10.0,
            methods: &[],
        };
        let v = verdict("p99<=10ms", &failed);
        assert!(!v.passed);
        assert_eq!(v.actual, "no successful call");
    }

    #[test]
    fn bad_thresholds_say_what_is_wrong() {
        for (text, says) in [
            ("p99", "no comparison"),
            ("p99=10ms", "'=' alone"),
            ("p99<=", "no value"),
            ("<=10ms", "no metric"),
            ("p99<=10", "no unit"),
            ("p99<=10hours", "unknown unit"),
            ("p101<=10ms", "at most p100"),
            ("pxx<=10ms", "not a percentile"),
            ("latency<=10ms", "unknown metric 'latency'"),
            ("errors<=200%", "at most 100%"),
            ("rps>=-5", "not a number"),
            ("rps>=lots", "not a number"),
            (":p99<=10ms", "no method before ':'"),
            ("SayHello:latency<=10ms", "unknown metric 'latency'"),
        ] {
            let err = Threshold::parse(text).unwrap_err().0;
            assert!(err.contains(says), "{text}: {err}");
            assert!(err.starts_with(&format!("--threshold '{text}'")), "{err}");
            assert!(!err.contains('\n'));
        }
    }

    #[test]
    fn a_methods_threshold_reads_that_method_only() {
        let fast = histogram(&[1, 2, 3]);
        let slow = histogram(&[40, 50, 60]);
        let all = histogram(&[1, 2, 3, 40, 50, 60]);
        let methods = [
            MethodFigures {
                name: "helloworld.Greeter.SayHello",
                figures: RunFigures {
                    latency: &fast,
                    count: 3,
                    errors: 0,
                    rps: 30.0,
                    methods: &[],
                },
            },
            MethodFigures {
                name: "helloworld.Greeter.SayGoodbye",
                figures: RunFigures {
                    latency: &slow,
                    count: 4,
                    errors: 1,
                    rps: 40.0,
                    methods: &[],
                },
            },
        ];
        let run = RunFigures {
            latency: &all,
            count: 7,
            errors: 1,
            rps: 70.0,
            methods: &methods,
        };
        let names = [
            "helloworld.Greeter.SayHello",
            "helloworld.Greeter.SayGoodbye",
        ];
        let judged = |text: &str| {
            let mut threshold = Threshold::parse(text).unwrap();
            threshold.resolve_method(&names, "--threshold").unwrap();
            threshold.judge(&run)
        };
        assert!(judged("SayHello:max<4ms").passed);
        assert!(!judged("Greeter.SayGoodbye:p50<=10ms").passed);
        assert_eq!(
            judged("helloworld.Greeter.SayGoodbye:errors==1").actual,
            "1 errors"
        );
        assert_eq!(judged("SayGoodbye:rps>=40").actual, "40.0 req/s");
        // The whole run's figure is not the method's.
        assert!(!judged("max<4ms").passed);
        // A method the run recorded no call of fails, saying so.
        let mut missing = Threshold::parse("SayHello:p99<=10ms").unwrap();
        missing.resolve_method(&names, "--threshold").unwrap();
        let none = RunFigures {
            methods: &[],
            ..run
        };
        let verdict = missing.judge(&none);
        assert!(!verdict.passed);
        assert_eq!(verdict.actual, "no call of this method");
        // Names that are no method, or several, or a run that is no mix: one line each.
        for (text, methods, says) in [
            ("Hello:p99<=1ms", &names[..], "'Hello' is no method of the mix; its methods: helloworld.Greeter.SayHello, helloworld.Greeter.SayGoodbye"),
            ("Greeter.Say:p99<=1ms", &names[..], "no method"),
            ("SayHello:p99<=1ms", &[][..], "this run calls one method"),
        ] {
            let mut threshold = Threshold::parse(text).unwrap();
            let err = threshold.resolve_method(methods, "--slo").unwrap_err().0;
            assert!(err.starts_with(&format!("--slo '{text}'")), "{err}");
            assert!(err.contains(says), "{err}");
        }
        let twice = ["a.X.Get", "b.X.Get"];
        let mut ambiguous = Threshold::parse("X.Get:p99<=1ms").unwrap();
        let err = ambiguous
            .resolve_method(&twice, "--threshold")
            .unwrap_err()
            .0;
        assert!(
            err.contains("names several methods of the mix (a.X.Get, b.X.Get)"),
            "{err}"
        );
    }
}
