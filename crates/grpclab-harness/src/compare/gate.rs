//! The regression gate: `--fail-if 'req/s<-5%'`, `--fail-if 'p99>+10%'`. A rule fails only
//! when the change is *significant* past its limit — the whole confidence interval of the
//! ratio B/A lies beyond it — so noise never fails a build, and a real regression smaller
//! than the noise passes (more rounds narrow the interval). One verdict line per rule and side.

use serde::Serialize;

use super::metric::Metric;
use super::stats::{gate_power, ratio_text, Comparison, Confidence};

/// One `--fail-if` rule.
#[derive(Debug, Clone, PartialEq)]
pub struct FailIf {
    /// As typed (trimmed).
    pub expression: String,
    /// The metric it reads.
    pub metric: Metric,
    /// `>`: fails when the interval lies wholly above the limit; `<`: wholly below.
    pub above: bool,
    /// The limit as a ratio to A (`-5%` is 0.95).
    pub limit: f64,
}

const FORM: &str = "write METRIC<-N% or METRIC>+N% with METRIC one of req/s, p50, p99, cpu/call \
                    (e.g. 'req/s<-5%' or 'p99>+10%')";

impl FailIf {
    /// Parses `METRIC<±N%` or `METRIC>±N%` (`<=` and `>=` read the same: an interval's edge
    /// never lands exactly on a limit).
    pub fn parse(text: &str) -> Result<FailIf, String> {
        let expression = text.trim().to_owned();
        let Some(at) = expression.find(['<', '>']) else {
            return Err(format!("--fail-if '{text}': no < or >; {FORM}"));
        };
        let (name, rest) = expression.split_at(at);
        let above = rest.starts_with('>');
        let rest = rest[1..].strip_prefix('=').unwrap_or(&rest[1..]).trim();
        let metric = Metric::from_name(name).ok_or_else(|| {
            format!(
                "--fail-if '{text}': '{}' is not a metric compare measures; {FORM}",
                name.trim()
            )
        })?;
        let Some(number) = rest.strip_suffix('%') else {
            return Err(format!(
                "--fail-if '{text}': the limit '{rest}' must be a change in percent; {FORM}"
            ));
        };
        let percent = number
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|value| value.is_finite() && *value > -100.0 && *value <= 10_000.0)
            .ok_or_else(|| {
                format!(
                    "--fail-if '{text}': '{rest}' is not a change between -100% and +10000%; {FORM}"
                )
            })?;
        Ok(FailIf {
            expression,
            metric,
            above,
            limit: 1.0 + percent / 100.0,
        })
    }

    /// Judges one side's comparison of this rule's metric (`None`: the metric was not
    /// measured in every round, which fails the rule: a gate that cannot see must not pass).
    pub fn judge(&self, label: &str, comparison: Option<&Comparison>) -> GateVerdict {
        self.judge_at(label, comparison, None)
    }

    /// [`FailIf::judge`], and for a rule that passed at `confidence`, what the rounds could
    /// have seen: when a true change of twice the limit would be caught less than 80 % of
    /// the time at the spread measured, the line says so and how many rounds would.
    pub fn judge_at(
        &self,
        label: &str,
        comparison: Option<&Comparison>,
        confidence: Option<Confidence>,
    ) -> GateVerdict {
        let (side_word, limit) = (label, ratio_text(self.limit));
        let Some(c) = comparison else {
            return GateVerdict {
                expression: self.expression.clone(),
                side: label.to_owned(),
                failed: true,
                line: format!(
                    "{}: {side_word} FAILED: {} was not measured in every round, so the rule cannot be checked",
                    self.expression,
                    self.metric.name()
                ),
            };
        };
        let interval = format!(
            "{} [{}, {}]",
            ratio_text(c.ratio),
            ratio_text(c.ratio_low),
            ratio_text(c.ratio_high)
        );
        let (failed, relation) = if self.above {
            (c.ratio_low.is_finite() && c.ratio_low > self.limit, "above")
        } else {
            (
                c.ratio_high.is_finite() && c.ratio_high < self.limit,
                "below",
            )
        };
        let line = if failed {
            format!(
                "{}: {side_word} FAILED: its ratio to A {interval} lies wholly {relation} {limit}",
                self.expression
            )
        } else {
            let mut line = format!(
                "{}: {side_word} passed: its ratio to A {interval} does not lie wholly {relation} {limit}",
                self.expression
            );
            let power = confidence.and_then(|level| gate_power(c, self.limit, self.above, level));
            if let Some(power) = power.filter(|power| power.detection < 0.8) {
                let change = (power.effect - 1.0) * 100.0;
                let rounds = match power.rounds_needed {
                    Some(rounds) => format!("use --rounds {rounds} or more to catch it 80 % of the time"),
                    None => "more than 200 rounds would be needed: narrow the spread (longer windows, a quieter machine) or widen the limit".to_owned(),
                };
                line.push_str(&format!(
                    "; at this spread a true change of {change:+.0} % would be caught {:.0} % of the time with {} rounds: {rounds}",
                    power.detection * 100.0,
                    c.a.n.min(c.b.n)
                ));
            }
            line
        };
        GateVerdict {
            expression: self.expression.clone(),
            side: label.to_owned(),
            failed,
            line,
        }
    }
}

/// One rule's verdict on one side.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct GateVerdict {
    /// The rule as typed.
    pub expression: String,
    /// The side's label (B, C, ...).
    pub side: String,
    /// Whether the rule failed this side.
    pub failed: bool,
    /// The verdict in words, with the interval that decided it.
    pub line: String,
}

#[cfg(test)]
mod tests {
    use super::super::stats::{compare, Confidence};
    use super::*;

    #[test]
    fn rules_parse() {
        let rule = FailIf::parse("req/s<-5%").unwrap();
        assert_eq!(rule.metric, Metric::Rps);
        assert!(!rule.above);
        assert!((rule.limit - 0.95).abs() < 1e-12);
        let rule = FailIf::parse(" p99 >= +10 % ").unwrap();
        assert_eq!(rule.metric, Metric::P99);
        assert!(rule.above);
        assert!((rule.limit - 1.10).abs() < 1e-12);
        assert_eq!(
            FailIf::parse("cpu/call>5%").unwrap().metric,
            Metric::CpuPerCall
        );
        assert_eq!(FailIf::parse("RPS<-1.5%").unwrap().metric, Metric::Rps);
    }

    #[test]
    fn bad_rules_say_what_is_wrong() {
        for (bad, says) in [
            ("", "no < or >"),
            ("req/s", "no < or >"),
            ("p98>+10%", "'p98' is not a metric"),
            ("latency>+10%", "'latency' is not a metric"),
            ("p99>10ms", "must be a change in percent"),
            ("p99>", "must be a change in percent"),
            ("p99>abc%", "is not a change between"),
            ("req/s<-100%", "is not a change between"),
            ("req/s<-150%", "is not a change between"),
            ("p99>inf%", "is not a change between"),
        ] {
            let err = FailIf::parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
            assert!(err.contains("req/s<-5%"), "{bad}: {err}");
        }
    }

    /// A small deterministic generator (SplitMix64) and Box–Muller normals: the simulation
    /// is seeded, so its count is the same on every machine.
    struct Normals(u64);

    impl Normals {
        fn uniform(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }

        fn normal(&mut self, mean: f64, sd: f64) -> f64 {
            let (u1, u2) = (self.uniform(), self.uniform());
            mean + sd * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
        }

        fn sample(&mut self, n: usize, mean: f64, sd: f64) -> Vec<f64> {
            (0..n).map(|_| self.normal(mean, sd)).collect()
        }
    }

    /// How many of `trials` simulated comparisons fail `rule`, B's true mean being
    /// `b_mean` against A's 100,000 req/s, both with `cv` round-to-round spread.
    fn failures(rule: &str, b_mean: f64, cv: f64, rounds: usize, level: f64, seed: u64) -> usize {
        let rule = FailIf::parse(rule).unwrap();
        let level = Confidence::parse(&level.to_string()).unwrap();
        let mut normals = Normals(seed);
        (0..20)
            .filter(|_| {
                let a = normals.sample(rounds, 100_000.0, 100_000.0 * cv);
                let b = normals.sample(rounds, b_mean, b_mean * cv);
                let c = compare(&a, &b, rule.metric.better(), level);
                rule.judge("B", Some(&c)).failed
            })
            .count()
    }

    #[test]
    fn a_against_itself_passes_the_gate_in_at_least_19_of_20_simulated_runs() {
        // The spread measured on the project's shared machine (round to round up to 30 %,
        // a coefficient of variation near 10 %) and a tight 5 % rule, at every level offered.
        for level in [0.95, 0.99, 0.999] {
            for rounds in [3, 5, 10] {
                for seed in [1, 2, 3] {
                    let failed = failures("req/s<-5%", 100_000.0, 0.10, rounds, level, seed);
                    assert!(
                        failed <= 1,
                        "{failed}/20 A/A runs failed at {level}, {rounds} rounds"
                    );
                }
            }
        }
    }

    #[test]
    fn a_real_regression_fails_the_gate() {
        // 30 % slower with 3 % noise: every run of 5 rounds at 99.9 % calls it.
        assert_eq!(failures("req/s<-5%", 70_000.0, 0.03, 5, 0.999, 7), 20);
        // 2 % slower is within a 5 % rule: never failed, however certain.
        assert_eq!(failures("req/s<-5%", 98_000.0, 0.01, 10, 0.95, 7), 0);
    }

    #[test]
    fn verdict_lines_give_the_interval_and_the_limit() {
        let level = Confidence::default();
        let a = [100.0, 101.0, 99.0, 100.5, 99.5];
        let b = [150.0, 151.0, 149.0, 150.5, 149.5];
        // Latency 50 % up: "p99>+10%" fails, "p99>+60%" passes.
        let c = compare(&a, &b, Metric::P99.better(), level);
        let failed = FailIf::parse("p99>+10%").unwrap().judge("B", Some(&c));
        assert!(failed.failed);
        assert!(
            failed
                .line
                .starts_with("p99>+10%: B FAILED: its ratio to A 1.500 ["),
            "{}",
            failed.line
        );
        assert!(
            failed.line.ends_with("lies wholly above 1.100"),
            "{}",
            failed.line
        );
        let passed = FailIf::parse("p99>+60%").unwrap().judge("B", Some(&c));
        assert!(!passed.failed, "{}", passed.line);
        assert!(passed.line.contains("does not lie wholly above 1.600"));
        // Not measured: fails, saying so.
        let blind = FailIf::parse("cpu/call>+5%").unwrap().judge("C", None);
        assert!(blind.failed);
        assert!(
            blind.line.contains("cpu/call was not measured"),
            "{}",
            blind.line
        );
    }
}
