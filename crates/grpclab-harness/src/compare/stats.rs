//! Statistics for A/B comparisons: mean with a Student-t confidence interval per side, the
//! ratio B/A with its interval (delta method on the log of the ratio, Welch–Satterthwaite
//! degrees of freedom), and a verdict that calls a difference significant only when the
//! ratio's interval excludes 1.
//!
//! Small pure functions, tested against hand-computed samples and published t tables; the
//! confidence level is the caller's (99.9 % two-sided by default, so with a handful of rounds
//! only clear differences are called). Quantiles come from statrs.

use serde::Serialize;

/// The two-sided confidence level every interval is built at: 0.95, 0.99 or 0.999 (any
/// level from 0.8 to 0.9999 is accepted). Higher levels call fewer differences and need
/// more rounds for the same width.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Confidence(f64);

impl Default for Confidence {
    /// 99.9 %: on a shared, noisy machine a false "B is slower" costs more than a missed
    /// small difference.
    fn default() -> Self {
        Confidence(0.999)
    }
}

impl Confidence {
    /// Lowest level accepted: below it one verdict in five would be noise.
    const MIN: f64 = 0.8;
    /// Highest level accepted: beyond it no practical number of rounds gives a usable width.
    const MAX: f64 = 0.9999;

    /// Parses `0.95`, `0.99`, `0.999` (or `95%`, `99.9%`).
    pub fn parse(text: &str) -> Result<Confidence, String> {
        let trimmed = text.trim();
        let (number, scale) = match trimmed.strip_suffix('%') {
            Some(percent) => (percent.trim(), 100.0),
            None => (trimmed, 1.0),
        };
        let level = number
            .parse::<f64>()
            .ok()
            .filter(|value| value.is_finite())
            // "99.9%" / 100 is 0.9990000000000001: round off the division's last bits.
            .map(|value| (value / scale * 1e9).round() / 1e9)
            .ok_or_else(|| {
                format!("'{text}' is not a confidence level; give 0.95, 0.99 or 0.999")
            })?;
        if !(Self::MIN..=Self::MAX).contains(&level) {
            return Err(format!(
                "'{text}' is outside {} to {}; give 0.95, 0.99 or 0.999",
                Self::MIN,
                Self::MAX
            ));
        }
        Ok(Confidence(level))
    }

    /// The level as a fraction (0.999).
    pub fn level(self) -> f64 {
        self.0
    }

    /// The level as printed: "99.9 %", "95 %".
    pub fn percent_text(self) -> String {
        let percent = format!("{:.2}", self.0 * 100.0);
        let percent = percent.trim_end_matches('0').trim_end_matches('.');
        format!("{percent} %")
    }

    /// Student's t critical value at this level for `df` degrees of freedom: the interval is
    /// ±t standard errors wide.
    pub fn t(self, df: f64) -> f64 {
        t_critical(df, self.0)
    }
}

/// The two-sided critical value of Student's t for `df` degrees of freedom at `confidence`
/// (fractional degrees of freedom, as Welch's, are used as they are; fewer than 1 count as 1,
/// so an interval is never too narrow).
pub fn t_critical(df: f64, confidence: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, Normal, StudentsT};
    let upper = 1.0 - (1.0 - confidence) / 2.0;
    // Past a million degrees of freedom t is the normal quantile to six digits, and the
    // normal's inverse is exact where t's numerical inverse loses precision.
    if df > 1.0e6 || !df.is_finite() {
        return Normal::standard().inverse_cdf(upper);
    }
    match StudentsT::new(0.0, 1.0, df.max(1.0)) {
        Ok(t) => t.inverse_cdf(upper),
        Err(_) => f64::INFINITY,
    }
}

/// A ratio or an interval bound as printed: three decimals, or in scientific notation once it
/// is too large to read that way (a few rounds' interval can reach 10^35).
pub fn ratio_text(value: f64) -> String {
    if value.is_finite() && value.abs() >= 1e4 {
        format!("{value:.2e}")
    } else {
        format!("{value:.3}")
    }
}

/// A sample's summary.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct Summary {
    /// Number of values.
    pub n: usize,
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation (n - 1).
    pub std_dev: f64,
    /// Half-width of the confidence interval of the mean.
    pub ci_half_width: f64,
}

/// Summarises `values` (at least two for an interval; one gives an infinite interval).
pub fn summarize(values: &[f64], confidence: Confidence) -> Summary {
    let n = values.len();
    let mean = if n == 0 {
        0.0
    } else {
        values.iter().sum::<f64>() / n as f64
    };
    let std_dev = if n < 2 {
        0.0
    } else {
        (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    };
    let ci_half_width = if n < 2 {
        f64::INFINITY
    } else {
        confidence.t((n - 1) as f64) * std_dev / (n as f64).sqrt()
    };
    Summary {
        n,
        mean,
        std_dev,
        ci_half_width,
    }
}

/// Which way a metric is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    /// Bigger is better (req/s).
    Higher,
    /// Smaller is better (latency).
    Lower,
}

/// What the comparison says about B relative to A.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// B is better, beyond the interval.
    Faster,
    /// B is worse, beyond the interval.
    Slower,
    /// The ratio's interval contains 1.
    NoSignificantDifference,
}

/// B relative to A for one metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct Comparison {
    /// A's summary.
    pub a: Summary,
    /// B's summary.
    pub b: Summary,
    /// mean(B) / mean(A).
    pub ratio: f64,
    /// The ratio's confidence interval.
    pub ratio_low: f64,
    /// The ratio's confidence interval.
    pub ratio_high: f64,
    /// The call.
    pub verdict: Verdict,
}

/// Compares samples `a` and `b` of a metric.
pub fn compare(a: &[f64], b: &[f64], better: Better, confidence: Confidence) -> Comparison {
    let (sa, sb) = (summarize(a, confidence), summarize(b, confidence));
    let ratio = if sa.mean != 0.0 {
        sb.mean / sa.mean
    } else {
        f64::NAN
    };
    // Delta method: relative variances of the two means add.
    let rel_a = if sa.n > 0 && sa.mean != 0.0 {
        sa.std_dev.powi(2) / (sa.n as f64 * sa.mean.powi(2))
    } else {
        f64::INFINITY
    };
    let rel_b = if sb.n > 0 && sb.mean != 0.0 {
        sb.std_dev.powi(2) / (sb.n as f64 * sb.mean.powi(2))
    } else {
        f64::INFINITY
    };
    // Welch–Satterthwaite degrees of freedom on the relative variances.
    let df = if sa.n < 2 || sb.n < 2 {
        1.0
    } else {
        let numerator = (rel_a + rel_b).powi(2);
        let denominator = rel_a.powi(2) / (sa.n - 1) as f64 + rel_b.powi(2) / (sb.n - 1) as f64;
        if denominator > 0.0 {
            numerator / denominator
        } else {
            1.0e9
        }
    };
    // The interval is built on the log of the ratio (same delta-method variance, since
    // var(ln m) ≈ var(m) / m²) and mapped back: it stays positive and is as asymmetric as a
    // ratio is (halving and doubling are equally far from 1), where a linear interval around
    // the ratio could go below zero when A is noisy.
    let log_half_width = confidence.t(df) * (rel_a + rel_b).sqrt();
    let (ratio_low, ratio_high) = if ratio > 0.0 && log_half_width.is_finite() {
        (
            ratio * (-log_half_width).exp(),
            ratio * log_half_width.exp(),
        )
    } else {
        (f64::NAN, f64::NAN)
    };
    let verdict = if !(ratio_low.is_finite() && ratio_high.is_finite())
        || (ratio_low <= 1.0 && ratio_high >= 1.0)
    {
        Verdict::NoSignificantDifference
    } else {
        let b_bigger = ratio_low > 1.0;
        match (better, b_bigger) {
            (Better::Higher, true) | (Better::Lower, false) => Verdict::Faster,
            _ => Verdict::Slower,
        }
    };
    Comparison {
        a: sa,
        b: sb,
        ratio,
        ratio_low,
        ratio_high,
        verdict,
    }
}

/// What a one-sided gate on a ratio could see, from the spread the rounds showed: how often
/// a true change of twice its limit would be caught, and how many rounds would catch that
/// 80 % of the time at the same spread.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GatePower {
    /// The true ratio tried: the limit's change doubled (`-5%` → 0.90).
    pub effect: f64,
    /// The probability that the gate fails on that change, with these rounds.
    pub detection: f64,
    /// The fewest rounds (each side) that would catch it 80 % of the time (`None`: more
    /// than 200).
    pub rounds_needed: Option<usize>,
}

/// The power of a rule that fails when the interval of `c`'s ratio lies wholly below
/// `limit` (`above` false: a loss) or wholly above it. The log of the ratio is taken as
/// normal around the true one with the delta method's standard error (as `compare` builds
/// its interval); more rounds shrink that error as 1/√n at the same per-round spread.
pub fn gate_power(
    c: &Comparison,
    limit: f64,
    above: bool,
    confidence: Confidence,
) -> Option<GatePower> {
    use statrs::distribution::{ContinuousCDF, Normal};
    let (a, b) = (&c.a, &c.b);
    if a.n < 2 || b.n < 2 || a.mean <= 0.0 || b.mean <= 0.0 || limit <= 0.0 {
        return None;
    }
    let cv_a = a.std_dev / a.mean;
    let cv_b = b.std_dev / b.mean;
    let normal = Normal::standard();
    let effect = 1.0 + 2.0 * (limit - 1.0);
    if effect <= 0.0 {
        return None;
    }
    let detection_with = |n: f64| {
        let sigma = (cv_a.powi(2) / n + cv_b.powi(2) / n).sqrt();
        if sigma <= 0.0 {
            return 1.0;
        }
        let t = confidence.t(2.0 * n - 2.0);
        let margin = if above {
            effect.ln() - limit.ln() - t * sigma
        } else {
            limit.ln() - t * sigma - effect.ln()
        };
        normal.cdf(margin / sigma)
    };
    let n = a.n.min(b.n);
    let detection = detection_with(n as f64);
    let rounds_needed = (2..=200).find(|&rounds| detection_with(rounds as f64) >= 0.8);
    Some(GatePower {
        effect,
        detection,
        rounds_needed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gate's power from a spread: at 10 % per round, 3 rounds at 99.9 % almost never
    /// catch a 10 % loss behind a -5 % rule and many rounds would; with no spread at all,
    /// any round count does.
    #[test]
    fn gate_power_follows_the_spread_and_the_rounds() {
        let spread = |mean: f64, n: usize| -> Vec<f64> {
            (0..n)
                .map(|i| mean * (1.0 + if i % 2 == 0 { 0.1 } else { -0.1 }))
                .collect()
        };
        let level = Confidence::parse("0.999").unwrap();
        let c = compare(&spread(100.0, 3), &spread(100.0, 3), Better::Higher, level);
        let power = gate_power(&c, 0.95, false, level).expect("a power");
        assert!((power.effect - 0.90).abs() < 1e-9);
        assert!(power.detection < 0.05, "{power:?}");
        let needed = power.rounds_needed.expect("some round count catches it");
        assert!(needed > 10, "{power:?}");
        // With that many rounds, the same spread catches it at least 80 % of the time.
        let c = compare(
            &spread(100.0, needed),
            &spread(100.0, needed),
            Better::Higher,
            level,
        );
        assert!(gate_power(&c, 0.95, false, level).unwrap().detection >= 0.8);
        // A rise past +10 % on a steady metric: caught at once.
        let steady = compare(
            &[10.0, 10.0, 10.0],
            &[10.0, 10.0, 10.0],
            Better::Lower,
            level,
        );
        let power = gate_power(&steady, 1.10, true, level).unwrap();
        assert!((power.effect - 1.20).abs() < 1e-9);
        assert_eq!(power.detection, 1.0);
        assert_eq!(power.rounds_needed, Some(2));
    }

    #[test]
    fn ratios_print_short_whatever_their_size() {
        assert_eq!(ratio_text(1.2345), "1.234");
        assert_eq!(ratio_text(0.0), "0.000");
        assert_eq!(ratio_text(1.4747e35), "1.47e35");
        assert_eq!(ratio_text(f64::INFINITY), "inf");
    }

    #[test]
    fn t_values_match_published_tables() {
        // Two-sided critical values from the standard t table, at three levels.
        let table = [
            (0.999, 2.0, 31.599),
            (0.999, 4.0, 8.610),
            (0.999, 30.0, 3.646),
            (0.99, 4.0, 4.604),
            (0.99, 9.0, 3.250),
            (0.95, 2.0, 4.303),
            (0.95, 4.0, 2.776),
            (0.95, 9.0, 2.262),
            (0.95, 120.0, 1.980),
        ];
        for (level, df, expected) in table {
            let t = t_critical(df, level);
            assert!(
                (t - expected).abs() < 0.002,
                "t({df}) at {level}: {t} vs {expected}"
            );
        }
        // Unbounded degrees of freedom: the normal quantile.
        assert!((t_critical(1.0e12, 0.999) - 3.2905).abs() < 1e-3);
        assert!((t_critical(f64::INFINITY, 0.95) - 1.95996).abs() < 1e-4);
        // Fractional degrees of freedom fall between their neighbours; fewer than one count
        // as one.
        let t = t_critical(4.5, 0.999);
        assert!(t < 8.610 && t > 6.869);
        assert_eq!(t_critical(0.2, 0.95), t_critical(1.0, 0.95));
    }

    #[test]
    fn confidence_levels_parse_or_say_what_is_wrong() {
        assert_eq!(Confidence::parse("0.95").unwrap().level(), 0.95);
        assert_eq!(Confidence::parse("99.9%").unwrap().level(), 0.999);
        assert_eq!(Confidence::parse("0.999").unwrap().percent_text(), "99.9 %");
        assert_eq!(Confidence::parse("0.95").unwrap().percent_text(), "95 %");
        assert_eq!(Confidence::default().percent_text(), "99.9 %");
        for bad in ["", "high", "1", "0.5", "95", "NaN", "-0.95", "0.99999"] {
            let err = Confidence::parse(bad).unwrap_err();
            assert!(err.contains("0.95, 0.99 or 0.999"), "{bad}: {err}");
        }
    }

    #[test]
    fn summaries_match_hand_computation() {
        // mean 10, sample sd sqrt(2.5) = 1.5811, n = 5, t(4) = 8.610
        let level = Confidence::default();
        let s = summarize(&[8.0, 9.0, 10.0, 11.0, 12.0], level);
        assert_eq!(s.mean, 10.0);
        assert!((s.std_dev - 1.581_139).abs() < 1e-6);
        assert!((s.ci_half_width - 8.610 * 1.581_139 / 5f64.sqrt()).abs() < 1e-3);
        assert!(summarize(&[3.0], level).ci_half_width.is_infinite());
    }

    #[test]
    fn a_clear_difference_is_called_and_noise_is_not() {
        let a = [100.0, 101.0, 99.0, 100.5, 99.5];
        let b = [150.0, 151.0, 149.0, 150.5, 149.5];
        let level = Confidence::default();
        let higher = compare(&a, &b, Better::Higher, level);
        assert!((higher.ratio - 1.5).abs() < 1e-9);
        assert_eq!(higher.verdict, Verdict::Faster);
        assert_eq!(
            compare(&a, &b, Better::Lower, level).verdict,
            Verdict::Slower
        );
        let same = compare(
            &a,
            &[100.2, 99.8, 100.9, 99.1, 100.0],
            Better::Higher,
            level,
        );
        assert_eq!(same.verdict, Verdict::NoSignificantDifference);
        assert!(same.ratio_low < 1.0 && same.ratio_high > 1.0);
        // By hand: both samples have variance 0.625, so the relative variances of the means
        // are 0.625/(5·100²) and 0.625/(5·150²); Welch's df from them; the interval is
        // ratio · exp(±t·sqrt(sum)).
        let rel = 0.625 / (5.0 * 100.0f64.powi(2)) + 0.625 / (5.0 * 150.0f64.powi(2));
        let df = rel.powi(2)
            / ((0.625f64 / (5.0 * 1e4)).powi(2) / 4.0 + (0.625f64 / (5.0 * 2.25e4)).powi(2) / 4.0);
        let half = t_critical(df, 0.999) * rel.sqrt();
        assert!((higher.ratio_low - 1.5 * (-half).exp()).abs() < 1e-12);
        assert!((higher.ratio_high - 1.5 * half.exp()).abs() < 1e-12);
        // A noisy A no longer gives a negative lower bound.
        let noisy = compare(&[1.0, 10.0], &[5.0, 6.0], Better::Lower, level);
        assert!(noisy.ratio_low > 0.0, "{noisy:?}");
        assert_eq!(noisy.verdict, Verdict::NoSignificantDifference);
        // JMH's example: 1425.96 ± 3.84 vs 1391.88 ± 34.71 — within noise.
        let jmh_a = [1422.0, 1430.0, 1426.0, 1424.0, 1428.0];
        let jmh_b = [1360.0, 1420.0, 1390.0, 1370.0, 1430.0];
        assert_eq!(
            compare(&jmh_a, &jmh_b, Better::Higher, level).verdict,
            Verdict::NoSignificantDifference
        );
    }
}
