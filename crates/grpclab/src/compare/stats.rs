//! Statistics for A/B comparisons: mean with a Student-t confidence interval per side, the
//! ratio B/A with its interval (delta method on the log of the ratio, Welch–Satterthwaite
//! degrees of freedom), and a verdict that calls a difference significant only when the
//! ratio's interval excludes 1.
//!
//! Small pure functions, tested against hand-computed samples; the confidence level is 99.9 %
//! (two-sided), so with a handful of rounds only clear differences are called.

use serde::Serialize;

/// Two-sided 99.9 % critical values of Student's t by degrees of freedom (1..=30), then a few
/// larger ones; beyond the last, the normal value.
const T_999: [(f64, f64); 36] = [
    (1.0, 636.619),
    (2.0, 31.599),
    (3.0, 12.924),
    (4.0, 8.610),
    (5.0, 6.869),
    (6.0, 5.959),
    (7.0, 5.408),
    (8.0, 5.041),
    (9.0, 4.781),
    (10.0, 4.587),
    (11.0, 4.437),
    (12.0, 4.318),
    (13.0, 4.221),
    (14.0, 4.140),
    (15.0, 4.073),
    (16.0, 4.015),
    (17.0, 3.965),
    (18.0, 3.922),
    (19.0, 3.883),
    (20.0, 3.850),
    (21.0, 3.819),
    (22.0, 3.792),
    (23.0, 3.768),
    (24.0, 3.745),
    (25.0, 3.725),
    (26.0, 3.707),
    (27.0, 3.690),
    (28.0, 3.674),
    (29.0, 3.659),
    (30.0, 3.646),
    (40.0, 3.551),
    (60.0, 3.460),
    (80.0, 3.416),
    (100.0, 3.390),
    (120.0, 3.373),
    (1.0e9, 3.291),
];

/// The 99.9 % two-sided critical t for `df` degrees of freedom (interpolated between rows,
/// rounded towards fewer degrees of freedom, so intervals are never too narrow).
pub fn t_critical(df: f64) -> f64 {
    let df = df.max(1.0);
    let mut previous = T_999[0];
    for &(row_df, t) in &T_999 {
        if df <= row_df {
            if df == row_df || previous.0 == row_df {
                return t;
            }
            // Linear in 1/df between the table's rows.
            let (x0, x1, x) = (1.0 / previous.0, 1.0 / row_df, 1.0 / df);
            return previous.1 + (t - previous.1) * (x0 - x) / (x0 - x1);
        }
        previous = (row_df, t);
    }
    3.291
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
    /// Half-width of the 99.9 % confidence interval of the mean.
    pub ci_half_width: f64,
}

/// Summarises `values` (at least two for an interval; one gives an infinite interval).
pub fn summarize(values: &[f64]) -> Summary {
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
        t_critical((n - 1) as f64) * std_dev / (n as f64).sqrt()
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
    /// The ratio's 99.9 % interval.
    pub ratio_low: f64,
    /// The ratio's 99.9 % interval.
    pub ratio_high: f64,
    /// The call.
    pub verdict: Verdict,
}

/// Compares samples `a` and `b` of a metric.
pub fn compare(a: &[f64], b: &[f64], better: Better) -> Comparison {
    let (sa, sb) = (summarize(a), summarize(b));
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
    let log_half_width = t_critical(df) * (rel_a + rel_b).sqrt();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_print_short_whatever_their_size() {
        assert_eq!(ratio_text(1.2345), "1.234");
        assert_eq!(ratio_text(0.0), "0.000");
        assert_eq!(ratio_text(1.4747e35), "1.47e35");
        assert_eq!(ratio_text(f64::INFINITY), "inf");
    }

    #[test]
    fn t_values_follow_the_table() {
        assert_eq!(t_critical(4.0), 8.610);
        assert_eq!(t_critical(30.0), 3.646);
        assert!((t_critical(50.0) - 3.50).abs() < 0.02);
        assert_eq!(t_critical(1.0e12), 3.291);
        // Fractional degrees of freedom fall between their neighbours.
        let t = t_critical(4.5);
        assert!(t < 8.610 && t > 6.869);
    }

    #[test]
    fn summaries_match_hand_computation() {
        // mean 10, sample sd sqrt(2.5) = 1.5811, n = 5, t(4) = 8.610
        let s = summarize(&[8.0, 9.0, 10.0, 11.0, 12.0]);
        assert_eq!(s.mean, 10.0);
        assert!((s.std_dev - 1.581_139).abs() < 1e-6);
        assert!((s.ci_half_width - 8.610 * 1.581_139 / 5f64.sqrt()).abs() < 1e-6);
        assert!(summarize(&[3.0]).ci_half_width.is_infinite());
    }

    #[test]
    fn a_clear_difference_is_called_and_noise_is_not() {
        let a = [100.0, 101.0, 99.0, 100.5, 99.5];
        let b = [150.0, 151.0, 149.0, 150.5, 149.5];
        let higher = compare(&a, &b, Better::Higher);
        assert!((higher.ratio - 1.5).abs() < 1e-9);
        assert_eq!(higher.verdict, Verdict::Faster);
        assert_eq!(compare(&a, &b, Better::Lower).verdict, Verdict::Slower);
        let same = compare(&a, &[100.2, 99.8, 100.9, 99.1, 100.0], Better::Higher);
        assert_eq!(same.verdict, Verdict::NoSignificantDifference);
        assert!(same.ratio_low < 1.0 && same.ratio_high > 1.0);
        // By hand: both samples have variance 0.625, so the relative variances of the means
        // are 0.625/(5·100²) and 0.625/(5·150²); Welch's df from them; the interval is
        // ratio · exp(±t·sqrt(sum)).
        let rel = 0.625 / (5.0 * 100.0f64.powi(2)) + 0.625 / (5.0 * 150.0f64.powi(2));
        let df = rel.powi(2)
            / ((0.625f64 / (5.0 * 1e4)).powi(2) / 4.0 + (0.625f64 / (5.0 * 2.25e4)).powi(2) / 4.0);
        let half = t_critical(df) * rel.sqrt();
        assert!((higher.ratio_low - 1.5 * (-half).exp()).abs() < 1e-12);
        assert!((higher.ratio_high - 1.5 * half.exp()).abs() < 1e-12);
        // A noisy A no longer gives a negative lower bound.
        let noisy = compare(&[1.0, 10.0], &[5.0, 6.0], Better::Lower);
        assert!(noisy.ratio_low > 0.0, "{noisy:?}");
        assert_eq!(noisy.verdict, Verdict::NoSignificantDifference);
        // JMH's example: 1425.96 ± 3.84 vs 1391.88 ± 34.71 — within noise.
        let jmh_a = [1422.0, 1430.0, 1426.0, 1424.0, 1428.0];
        let jmh_b = [1360.0, 1420.0, 1390.0, 1370.0, 1430.0];
        assert_eq!(
            compare(&jmh_a, &jmh_b, Better::Higher).verdict,
            Verdict::NoSignificantDifference
        );
    }
}
