//! Charts as inline SVG, drawn with plotters' SVG backend.
//!
//! Each function returns one `<svg>` element ready to sit in an HTML page: sized by a
//! `viewBox` (it scales to its container: a phone or a wide screen), without the XML namespace
//! (inline SVG in HTML needs none, and the page carries no URL), and with an invisible mark on
//! every data point whose `<title>` shows the exact value on hover. The page puts a table of
//! the same numbers beside every chart, so nothing depends on hovering.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::fmt::Write as _;

/// Width and height of a line chart, in SVG user units (the page scales them).
const SIZE: (u32, u32) = (760, 380);
/// Width of a bar chart: narrower, as bar charts sit side by side in a grid.
const BAR_WIDTH: u32 = 380;

/// One named line of points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The legend's name (an implementation, a run).
    pub name: String,
    /// `(x, y)` in the chart's units; for [`XScale::Percentile`], x is a percentage.
    pub points: Vec<(f64, f64)>,
}

/// How x values are placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XScale {
    /// Evenly.
    Linear,
    /// A percentile from 50 to 99.99, on the log scale of latency plots: the distance to 100
    /// shrinks tenfold per step (90, 99, 99.9, 99.99 equally spaced), so the tail is as wide
    /// as the median.
    Percentile,
}

/// A line chart's description.
#[derive(Debug, Clone)]
pub struct LineChart<'a> {
    /// Shown above the plot.
    pub title: &'a str,
    /// The x axis's name.
    pub x_label: &'a str,
    /// The y axis's name (with its unit).
    pub y_label: &'a str,
    /// The lines.
    pub series: &'a [Series],
    /// How x values are placed.
    pub x_scale: XScale,
    /// Formats a value for axis labels and hover titles.
    pub y_format: fn(f64) -> String,
    /// Names for x = 0, 1, 2, ... (a swept setting's values); empty: x is a number.
    pub x_names: &'a [String],
}

/// The position of percentile `p` (50..100) on the [`XScale::Percentile`] axis.
pub fn percentile_position(p: f64) -> f64 {
    -(1.0 - p.min(99.9999) / 100.0).log10()
}

/// The percentile at position `x` of the [`XScale::Percentile`] axis.
fn percentile_at(x: f64) -> f64 {
    100.0 * (1.0 - 10f64.powf(-x))
}

/// Round tick values (steps of 1, 2 or 5 times a power of ten) covering `min..max`.
fn nice_ticks(min: f64, max: f64) -> Vec<f64> {
    let span = (max - min).max(f64::EPSILON);
    let rough = span / 6.0;
    let power = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|step| *step >= rough)
        .unwrap_or(10.0 * power);
    let mut tick = (min / step).ceil() * step;
    let mut ticks = Vec::new();
    while tick <= max + step * 1e-9 && ticks.len() < 50 {
        ticks.push(tick);
        tick += step;
    }
    ticks
}

/// Okabe and Ito's palette for colour-blind readers, without its yellow (too faint on white):
/// blue, vermillion, bluish green, reddish purple, orange, sky blue, black.
const SERIES_COLOURS: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
];

/// The colour of series `index`: the palette above, then hues spread by the golden angle at
/// one saturation and a lightness that reads on white (plotters' own palette turns pastel).
fn colour(index: usize) -> RGBColor {
    if let Some(colour) = SERIES_COLOURS.get(index) {
        return *colour;
    }
    let hue = (index as f64 * 137.508) % 360.0;
    let (saturation, lightness) = (0.7, 0.38);
    // HSL to RGB.
    let chroma = (1.0 - (2.0 * lightness - 1.0f64).abs()) * saturation;
    let h = hue / 60.0;
    let x = chroma * (1.0 - (h % 2.0 - 1.0).abs());
    let (r, g, b) = match h as u32 {
        0 => (chroma, x, 0.0),
        1 => (x, chroma, 0.0),
        2 => (0.0, chroma, x),
        3 => (0.0, x, chroma),
        4 => (x, 0.0, chroma),
        _ => (chroma, 0.0, x),
    };
    let m = lightness - chroma / 2.0;
    let byte = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    RGBColor(byte(r), byte(g), byte(b))
}

/// Past this many series the legend leaves the plot (where it would cover the lines) for
/// rows of its own below it.
const LEGEND_INSIDE_MAX: usize = 6;
/// Legend rows below the plot: height of one, and names per row.
const LEGEND_ROW: u32 = 20;
const LEGEND_COLUMNS: usize = 2;

/// Series of at most this many points get a visible dot at each point.
const VISIBLE_POINTS: usize = 30;

/// The height of one more line of a named x label, in pixels.
const NAMED_LINE: u32 = 15;

/// Each named x value as the lines it is drawn on: whole when it fits its slot of a chart
/// `width` pixels wide (at ~7 px a character), else split after each comma.
fn named_label_lines(names: &[String], width: u32) -> Vec<Vec<String>> {
    let slot = (width.saturating_sub(130) as usize / names.len().max(1)).max(1);
    let too_wide = names.iter().any(|name| name.chars().count() * 7 > slot);
    names
        .iter()
        .map(|name| match too_wide {
            false => vec![name.clone()],
            true => {
                let parts: Vec<&str> = name.split(',').collect();
                let last = parts.len() - 1;
                parts
                    .iter()
                    .enumerate()
                    .map(|(index, part)| match index < last {
                        true => format!("{part},"),
                        false => (*part).to_owned(),
                    })
                    .collect()
            }
        })
        .collect()
}

/// A line chart; `Err` says why it could not be drawn (no data, a drawing error).
pub fn line_chart(chart: &LineChart<'_>) -> Result<String, String> {
    let points = chart.series.iter().flat_map(|s| s.points.iter());
    let position = |x: f64| match chart.x_scale {
        XScale::Linear => x,
        XScale::Percentile => percentile_position(x),
    };
    let (mut x_min, mut x_max, mut y_max) = (f64::MAX, f64::MIN, 0f64);
    for &(x, y) in points {
        x_min = x_min.min(position(x));
        x_max = x_max.max(position(x));
        y_max = y_max.max(y);
    }
    if x_min > x_max {
        return Err(format!("{}: no data to draw", chart.title));
    }
    if !chart.x_names.is_empty() {
        // Named x values sit at 0, 1, ...: half a step of room on each side.
        x_min = -0.25;
        x_max = chart.x_names.len() as f64 - 0.75;
    }
    if (x_max - x_min).abs() < f64::EPSILON {
        x_max = x_min + 1.0;
    }
    let y_max = if y_max > 0.0 { y_max * 1.08 } else { 1.0 };
    let mut svg = String::new();
    let mut marks = String::new();
    let legend_below = chart.series.len() > LEGEND_INSIDE_MAX;
    let legend_height = if legend_below {
        12 + LEGEND_ROW * chart.series.len().div_ceil(LEGEND_COLUMNS) as u32
    } else {
        0
    };
    {
        let whole =
            SVGBackend::with_string(&mut svg, (SIZE.0, SIZE.1 + legend_height)).into_drawing_area();
        whole.fill(&WHITE).map_err(draw_error)?;
        let (root, legend_area) = whole.split_vertically(SIZE.1);
        let x_ticks = match chart.x_scale {
            XScale::Linear if !chart.x_names.is_empty() => {
                (0..chart.x_names.len()).map(|i| i as f64).collect()
            }
            XScale::Linear => {
                // Whole seconds are ticked in whole steps.
                let whole = chart
                    .series
                    .iter()
                    .all(|s| s.points.iter().all(|(x, _)| x.fract() == 0.0));
                let ticks = nice_ticks(x_min, x_max);
                if whole && ticks.len() > 1 && ticks[1] - ticks[0] < 1.0 {
                    ticks.into_iter().filter(|x| x.fract() == 0.0).collect()
                } else {
                    ticks
                }
            }
            // The nines: 50, 90, 99, 99.9, 99.99 (those within the data).
            XScale::Percentile => [50.0, 90.0, 99.0, 99.9, 99.99]
                .iter()
                .map(|p| percentile_position(*p))
                .filter(|x| *x >= x_min - 1e-9 && *x <= x_max + 1e-9)
                .collect(),
        };
        // Named values too wide for their slot (`delay=5ms,loss=0.1%`) go on several lines,
        // split at their commas, so neighbours never run into each other.
        let x_label_lines = named_label_lines(chart.x_names, SIZE.0);
        let extra_lines = x_label_lines.iter().map(Vec::len).max().unwrap_or(1).max(1) - 1;
        let mut plot = ChartBuilder::on(&root)
            .caption(chart.title, ("sans-serif", 18))
            .margin(12)
            // Room for half of the last x label ("99.99"), centred on the right edge.
            .margin_right(32)
            .x_label_area_size(42 + NAMED_LINE * extra_lines as u32)
            .y_label_area_size(78)
            .build_cartesian_2d(x_min..x_max, 0f64..y_max)
            .map_err(draw_error)?;
        let y_format = chart.y_format;
        // x ticks are drawn by hand at round values (or at the nines of the percentile
        // axis): plotters' own ticks fall at arbitrary positions of a transformed axis.
        plot.configure_mesh()
            .x_desc(chart.x_label)
            .y_desc(chart.y_label)
            .x_labels(0)
            .disable_x_mesh()
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 14))
            .y_labels(6)
            .y_label_formatter(&|y| y_format(*y))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(draw_error)?;
        let grid = RGBColor(225, 225, 225);
        let label_style = ("sans-serif", 13)
            .into_font()
            .color(&RGBColor(60, 60, 60))
            .pos(Pos::new(HPos::Center, VPos::Top));
        for tick in x_ticks {
            plot.draw_series(std::iter::once(PathElement::new(
                vec![(tick, 0.0), (tick, y_max)],
                grid,
            )))
            .map_err(draw_error)?;
            let lines = match chart.x_scale {
                XScale::Linear if !chart.x_names.is_empty() => x_label_lines
                    .get(tick as usize)
                    .cloned()
                    .unwrap_or_default(),
                XScale::Linear => vec![trim_number(tick)],
                XScale::Percentile => vec![trim_number(percentile_at(tick))],
            };
            let (px, py) = plot.backend_coord(&(tick, 0.0));
            for (line, text) in lines.into_iter().enumerate() {
                let y = py + 6 + NAMED_LINE as i32 * line as i32;
                root.draw(&Text::new(text, (px, y), label_style.clone()))
                    .map_err(draw_error)?;
            }
        }
        for (index, series) in chart.series.iter().enumerate() {
            let colour = colour(index);
            let line: Vec<(f64, f64)> = series
                .points
                .iter()
                .map(|&(x, y)| (position(x), y))
                .collect();
            plot.draw_series(LineSeries::new(
                line.iter().copied(),
                colour.stroke_width(2),
            ))
            .map_err(draw_error)?
            .label(series.name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(3))
            });
            // A short series shows its points: a line of one point draws nothing, and a
            // few points read better as dots on the line.
            if line.len() <= VISIBLE_POINTS {
                plot.draw_series(
                    line.iter()
                        .map(|&(x, y)| Circle::new((x, y), 4, colour.filled())),
                )
                .map_err(draw_error)?;
            }
            for (&(x, y), &(raw_x, _)) in line.iter().zip(series.points.iter()) {
                let (px, py) = plot.backend_coord(&(x, y));
                let shown_x = match chart.x_scale {
                    XScale::Linear if !chart.x_names.is_empty() => chart
                        .x_names
                        .get(raw_x as usize)
                        .cloned()
                        .unwrap_or_default(),
                    XScale::Linear => trim_number(raw_x),
                    XScale::Percentile => format!("p{}", trim_number(raw_x)),
                };
                let _ = write!(
                    marks,
                    r#"<circle cx="{px}" cy="{py}" r="5" fill="{}" fill-opacity="0.01"><title>{}: {} at {} {}</title></circle>"#,
                    hex(colour),
                    escape(&series.name),
                    escape(&y_format(y)),
                    escape(chart.x_label),
                    escape(&shown_x),
                );
            }
        }
        if legend_below {
            let column_width = (SIZE.0 as i32 - 80) / LEGEND_COLUMNS as i32;
            for (index, series) in chart.series.iter().enumerate() {
                let (row, column) = (index / LEGEND_COLUMNS, index % LEGEND_COLUMNS);
                let x = 80 + column as i32 * column_width;
                let y = 6 + row as i32 * LEGEND_ROW as i32 + LEGEND_ROW as i32 / 2;
                legend_area
                    .draw(&PathElement::new(
                        vec![(x, y), (x + 18, y)],
                        colour(index).stroke_width(3),
                    ))
                    .map_err(draw_error)?;
                legend_area
                    .draw(&Text::new(
                        series.name.clone(),
                        (x + 24, y),
                        ("sans-serif", 13)
                            .into_font()
                            .color(&RGBColor(40, 40, 40))
                            .pos(Pos::new(HPos::Left, VPos::Center)),
                    ))
                    .map_err(draw_error)?;
            }
        } else {
            plot.configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(RGBColor(200, 200, 200))
                .draw()
                .map_err(draw_error)?;
        }
        whole.present().map_err(draw_error)?;
    }
    Ok(finish(svg, &marks, chart.title))
}

/// How a bar chart colours its bars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BarColours {
    /// Each bar is a run (an implementation, a sweep cell): its colour is that run's, as in
    /// the page's line charts.
    PerRun,
    /// The bars are buckets of one run (a histogram): one colour, since a colour per bar
    /// would mean nothing.
    Single,
}

/// The most characters of a bar's name shown beside it; longer names keep their start and
/// end around an ellipsis (the whole name is in the bar's tooltip and the table below).
const BAR_LABEL_CHARS: usize = 22;

/// `name` shortened to about [`BAR_LABEL_CHARS`]. A sweep cell's name is its
/// implementation and its settings ("lab concurrency=10 offload-above=16384"), and the values
/// are what tell cells apart: the keys shrink to their initials ("c=10 oa=16384"), then the
/// implementation's name to its start, and only then the whole around a middle ellipsis.
fn bar_label(name: &str) -> String {
    if name.chars().count() <= BAR_LABEL_CHARS {
        return name.to_owned();
    }
    let mut words = name.split(' ');
    let first = words.next().unwrap_or_default();
    let settings: Vec<String> = words
        .map(|word| match word.split_once('=') {
            Some((key, value)) => {
                let initials: String = key
                    .split(['-', '_'])
                    .filter_map(|part| part.chars().next())
                    .collect();
                format!("{initials}={value}")
            }
            None => word.to_owned(),
        })
        .collect();
    let rest = settings.join(" ");
    let room = BAR_LABEL_CHARS.saturating_sub(rest.chars().count() + 1);
    let first_chars = first.chars().count();
    let first = if rest.is_empty() || first_chars <= room.max(7) {
        first.to_owned()
    } else {
        let keep = room.max(7) - 1;
        first.chars().take(keep).collect::<String>() + "…"
    };
    let label = if rest.is_empty() {
        first
    } else {
        format!("{first} {rest}")
    };
    let chars: Vec<char> = label.chars().collect();
    if chars.len() <= BAR_LABEL_CHARS + 8 {
        return label;
    }
    let head = (BAR_LABEL_CHARS - 1) * 2 / 5;
    let tail = BAR_LABEL_CHARS - 1 - head;
    let start: String = chars[..head].iter().collect();
    let end: String = chars[chars.len() - tail..].iter().collect();
    format!("{start}…{end}")
}

/// One bar per item, horizontal, longest first as given; the value printed at each bar's end.
pub fn bar_chart(
    title: &str,
    unit_label: &str,
    bars: &[(String, f64)],
    format: fn(f64) -> String,
    colours: BarColours,
) -> Result<String, String> {
    if bars.is_empty() {
        return Err(format!("{title}: no data to draw"));
    }
    let max = bars.iter().map(|(_, v)| *v).fold(0f64, f64::max);
    // Room after the longest bar for its value ("6.5 MiB").
    let x_max = if max > 0.0 { max * 1.4 } else { 1.0 };
    let height = (60 + 34 * bars.len() as u32).max(140);
    let mut svg = String::new();
    let mut marks = String::new();
    let labels: Vec<String> = bars.iter().map(|(name, _)| bar_label(name)).collect();
    let label_width = labels
        .iter()
        .map(|label| label.chars().count() as u32 * 8 + 12)
        .max()
        .unwrap_or(60);
    // Long names (a method's full name) widen the chart rather than squeeze the bars.
    let width = BAR_WIDTH.max(label_width + 300);
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        let mut plot = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(label_width)
            .build_cartesian_2d(0f64..x_max, (0..bars.len()).into_segmented())
            .map_err(draw_error)?;
        let names: Vec<&str> = labels.iter().map(String::as_str).collect();
        plot.configure_mesh()
            .disable_y_mesh()
            .x_desc(unit_label)
            .x_labels(4)
            .x_label_formatter(&|x| format(*x))
            .y_labels(bars.len())
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 14))
            .y_label_formatter(&|segment| top_down_name(&names, segment))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(draw_error)?;
        for (index, (name, value)) in bars.iter().enumerate() {
            // More runs than the palette's colours: colours would only tell neighbours apart,
            // and the names already do.
            let colour = match colours {
                BarColours::PerRun if bars.len() <= SERIES_COLOURS.len() => colour(index),
                _ => colour(0),
            };
            let slot = bars.len() - 1 - index;
            let top = SegmentValue::Exact(slot);
            let bottom = SegmentValue::Exact(slot + 1);
            plot.draw_series(std::iter::once(Rectangle::new(
                [(0.0, top.clone()), (*value, bottom.clone())],
                colour.mix(0.8).filled(),
            )))
            .map_err(draw_error)?;
            plot.draw_series(std::iter::once(Text::new(
                format(*value),
                (*value, SegmentValue::CenterOf(slot)),
                ("sans-serif", 14),
            )))
            .map_err(draw_error)?;
            let (x0, y0) = plot.backend_coord(&(0.0, top));
            let (x1, y1) = plot.backend_coord(&(*value, bottom));
            let _ = write!(
                marks,
                r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{}" fill-opacity="0.01"><title>{}: {}</title></rect>"#,
                x0.min(x1),
                y0.min(y1),
                (x1 - x0).abs().max(1),
                (y1 - y0).abs().max(1),
                hex(colour),
                escape(name),
                escape(&format(*value)),
            );
        }
        root.present().map_err(draw_error)?;
    }
    Ok(finish(svg, &marks, title))
}

/// One row of a forest plot: a ratio and its interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// The row's name (a side and a metric).
    pub label: String,
    /// The ratio to the baseline.
    pub ratio: f64,
    /// Its interval (infinite or NaN bounds are drawn as the ratio alone).
    pub low: f64,
    /// Its interval's upper bound.
    pub high: f64,
}

/// A forest plot: each row's ratio as a dot and its interval as a line, against a vertical
/// line at 1 (no difference); a row whose interval misses 1 differs.
pub fn forest_chart(title: &str, rows: &[Estimate]) -> Result<String, String> {
    if rows.is_empty() {
        return Err(format!("{title}: no data to draw"));
    }
    let finite = |v: f64| v.is_finite();
    // The axis covers 1 and every ratio, and the intervals only up to half a unit beyond
    // them: an interval from a handful of rounds can run to 10^35, and an axis that follows
    // it draws overlapping 40-digit labels and squeezes every dot onto one pixel. An
    // interval cut by the axis ends in an arrow; its true bounds are in the tooltip and the
    // table.
    let ratio_low = rows
        .iter()
        .map(|r| r.ratio)
        .filter(|v| finite(*v) && *v > 0.0)
        .fold(1f64, f64::min);
    let ratio_high = rows
        .iter()
        .map(|r| r.ratio)
        .filter(|v| finite(*v))
        .fold(1f64, f64::max);
    // Ratios spread over more than a factor of ten (a side at a fraction of A's req/s beside
    // one at 400× its latency) are drawn on a log axis: on a linear one every ratio below 10
    // lands on one pixel. Halving and doubling are then equally far from 1, as they should be.
    let log = ratio_high / ratio_low.max(f64::MIN_POSITIVE) > 10.0;
    let (cap_low, cap_high) = if log {
        (ratio_low / 3.0, ratio_high * 3.0)
    } else {
        ((ratio_low - 0.5).max(0.0), ratio_high + 0.5)
    };
    let low = rows
        .iter()
        .map(|r| r.low)
        .filter(|v| finite(*v))
        .fold(ratio_low, f64::min)
        .max(cap_low);
    let high = rows
        .iter()
        .map(|r| r.high)
        .filter(|v| finite(*v))
        .fold(ratio_high, f64::max)
        .min(cap_high);
    // The axis's coordinate for a ratio.
    let to_x = |ratio: f64| {
        if log {
            ratio.max(f64::MIN_POSITIVE).log10()
        } else {
            ratio
        }
    };
    let (mut low, mut high) = (to_x(low), to_x(high));
    let pad = ((high - low) * 0.1).max(0.01);
    low -= pad;
    high += pad;
    let height = (70 + 38 * rows.len() as u32).max(160);
    let mut svg = String::new();
    let mut marks = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (SIZE.0, height)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        let label_width = rows
            .iter()
            .map(|r| r.label.chars().count() as u32 * 7 + 16)
            .max()
            .unwrap_or(60)
            .min(260);
        let names: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
        let mut plot = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(label_width)
            .build_cartesian_2d(low..high, (0..rows.len() - 1).into_segmented())
            .map_err(draw_error)?;
        plot.configure_mesh()
            .disable_y_mesh()
            .x_desc(if log {
                "ratio to A, log scale (1 = no difference)"
            } else {
                "ratio to A (1 = no difference)"
            })
            .x_labels(8)
            .x_label_formatter(&|x| {
                if log {
                    significant(10f64.powf(*x))
                } else {
                    format!("{x:.3}")
                }
            })
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 14))
            .y_label_formatter(&|segment| top_down_name(&names, segment))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(draw_error)?;
        plot.draw_series(std::iter::once(PathElement::new(
            vec![
                (to_x(1.0), SegmentValue::Exact(0)),
                (to_x(1.0), SegmentValue::Last),
            ],
            RGBColor(120, 120, 120).stroke_width(2),
        )))
        .map_err(draw_error)?;
        for (index, row) in rows.iter().enumerate() {
            let slot = rows.len() - 1 - index;
            let differs = finite(row.low) && finite(row.high) && (row.low > 1.0 || row.high < 1.0);
            let colour = if differs {
                RGBColor(200, 60, 40)
            } else {
                RGBColor(60, 90, 160)
            };
            if finite(row.low) && finite(row.high) {
                let (from, to) = (to_x(row.low.max(cap_low)), to_x(row.high.min(cap_high)));
                plot.draw_series(std::iter::once(PathElement::new(
                    vec![
                        (from, SegmentValue::CenterOf(slot)),
                        (to, SegmentValue::CenterOf(slot)),
                    ],
                    colour.stroke_width(3),
                )))
                .map_err(draw_error)?;
                // An end the axis cut: an arrowhead pointing on.
                for (cut, at, direction) in [
                    (row.low < cap_low, from, -1i32),
                    (row.high > cap_high, to, 1i32),
                ] {
                    if cut {
                        let (px, py) = plot.backend_coord(&(at, SegmentValue::CenterOf(slot)));
                        root.draw(&Polygon::new(
                            vec![(px + direction * 10, py), (px, py - 6), (px, py + 6)],
                            colour.filled(),
                        ))
                        .map_err(draw_error)?;
                    }
                }
            }
            plot.draw_series(std::iter::once(Circle::new(
                (to_x(row.ratio), SegmentValue::CenterOf(slot)),
                6,
                colour.filled(),
            )))
            .map_err(draw_error)?;
            let (px, py) = plot.backend_coord(&(to_x(row.ratio), SegmentValue::CenterOf(slot)));
            let _ = write!(
                marks,
                r#"<circle cx="{px}" cy="{py}" r="9" fill="{}" fill-opacity="0.01"><title>{}: {:.3} [{:.3}, {:.3}]</title></circle>"#,
                hex(colour),
                escape(&row.label),
                row.ratio,
                row.low,
                row.high,
            );
        }
        root.present().map_err(draw_error)?;
    }
    Ok(finish(svg, &marks, title))
}

/// A log axis's tick label: three significant digits, no trailing zeros (0.00316, 31.6, 1000).
fn significant(value: f64) -> String {
    if !value.is_finite() || value <= 0.0 {
        return String::new();
    }
    let decimals = (2 - value.log10().floor() as i32).clamp(0, 12) as usize;
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

/// The label of a row of a chart whose first item is on top (plotters draws segment 0 at
/// the bottom).
fn top_down_name(names: &[&str], segment: &SegmentValue<usize>) -> String {
    match segment {
        SegmentValue::CenterOf(index) => names
            .len()
            .checked_sub(index + 1)
            .and_then(|i| names.get(i))
            .copied()
            .unwrap_or("")
            .to_owned(),
        _ => String::new(),
    }
}

fn draw_error<E: std::fmt::Debug>(err: E) -> String {
    format!("cannot draw the chart: {err:?}")
}

/// Makes plotters' document an inline element: a `viewBox` instead of a fixed size, no XML
/// namespace, a largest size, an accessible name, and the hover marks on top.
fn finish(svg: String, marks: &str, title: &str) -> String {
    let (width, height) = svg_size(&svg).unwrap_or(SIZE);
    let body_start = svg.find('>').map_or(0, |end| end + 1);
    let body_end = svg.rfind("</svg>").unwrap_or(svg.len());
    format!(
        r#"<svg viewBox="0 0 {width} {height}" style="max-width:{}px" role="img" aria-label="{}" preserveAspectRatio="xMidYMid meet">{}{marks}</svg>"#,
        // Scaled up to 1.4 times at most: a lone bar chart on a wide screen keeps its text
        // at a reading size instead of filling the page.
        width * 7 / 5,
        escape(title),
        &svg[body_start..body_end]
    )
}

/// The `width` and `height` plotters wrote on its `<svg>` element.
fn svg_size(svg: &str) -> Option<(u32, u32)> {
    let head = &svg[..svg.find('>')?];
    let attribute = |name: &str| -> Option<u32> {
        let start = head.find(&format!("{name}=\""))? + name.len() + 2;
        let end = head[start..].find('"')? + start;
        head[start..end].parse().ok()
    };
    Some((attribute("width")?, attribute("height")?))
}

fn hex(colour: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", colour.0, colour.1, colour.2)
}

/// A number with at most two decimals and no trailing zeros (axis labels, hover titles).
pub fn trim_number(value: f64) -> String {
    let text = format!("{value:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".to_owned()
    } else {
        text.to_owned()
    }
}

/// Text for HTML and SVG: `&`, `<`, `>` and quotes escaped.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn named_values_too_wide_for_their_slot_go_on_lines_split_at_commas() {
        let names = |list: &[&str]| list.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        // Short names, one line each.
        assert_eq!(
            named_label_lines(&names(&["lo", "delay=5ms"]), 760),
            vec![vec!["lo".to_owned()], vec!["delay=5ms".to_owned()]]
        );
        // Seven values in 760 px: 90 px a slot; the long ones split after each comma.
        let split = named_label_lines(
            &names(&[
                "lo",
                "delay=500us",
                "delay=5ms",
                "delay=25ms",
                "delay=50ms",
                "delay=5ms,loss=0.1%",
                "delay=5ms,loss=1%",
            ]),
            760,
        );
        assert_eq!(split[0], vec!["lo".to_owned()]);
        assert_eq!(
            split[5],
            vec!["delay=5ms,".to_owned(), "loss=0.1%".to_owned()]
        );
    }
    use super::*;

    #[test]
    fn the_percentile_axis_spaces_nines_evenly() {
        let step = |a: f64, b: f64| percentile_position(b) - percentile_position(a);
        assert!((step(90.0, 99.0) - step(99.0, 99.9)).abs() < 1e-9);
        assert!((percentile_at(percentile_position(99.99)) - 99.99).abs() < 1e-9);
        assert!((percentile_position(50.0) - 2f64.log10()).abs() < 1e-12);
    }

    #[test]
    fn charts_are_inline_svg_with_a_title_per_point() {
        let series = [Series {
            name: "lab <fast>".to_owned(),
            points: vec![(50.0, 1.0), (99.0, 2.0), (99.99, 5.0)],
        }];
        let svg = line_chart(&LineChart {
            title: "latency",
            x_label: "percentile",
            y_label: "ms",
            series: &series,
            x_scale: XScale::Percentile,
            y_format: trim_number,
            x_names: &[],
        })
        .unwrap();
        assert!(
            svg.starts_with("<svg viewBox=\"0 0 760 380\""),
            "{}",
            &svg[..80]
        );
        assert!(!svg.contains("http"), "no namespace or URL");
        assert_eq!(svg.matches("<title>").count(), 3);
        assert!(svg.contains("<title>lab &lt;fast&gt;: 5 at percentile p99.99</title>"));
        let bars = bar_chart(
            "req/s",
            "req/s",
            &[("a".into(), 3.0), ("b".into(), 1.0)],
            trim_number,
            BarColours::PerRun,
        )
        .unwrap();
        assert_eq!(bars.matches("<title>").count(), 2);
        // A histogram's buckets share one colour; runs each have their own.
        let fills = |svg: &str| -> std::collections::BTreeSet<String> {
            svg.match_indices("fill-opacity=\"0.01\"")
                .map(|(at, _)| svg[at.saturating_sub(16)..at].to_owned())
                .collect()
        };
        assert_eq!(fills(&bars).len(), 2);
        let buckets = bar_chart(
            "calls",
            "calls",
            &[("1".into(), 3.0), ("2".into(), 1.0), ("3".into(), 2.0)],
            trim_number,
            BarColours::Single,
        )
        .unwrap();
        assert_eq!(fills(&buckets).len(), 1, "{buckets}");
        // Long names are shortened beside the bar, whole in its tooltip.
        let long = "lab concurrency=1000 decode=adaptive offload-above=16384";
        let named = bar_chart(
            "req/s",
            "req/s",
            &[(long.into(), 1.0)],
            trim_number,
            BarColours::PerRun,
        )
        .unwrap();
        assert!(
            named.contains(&format!("<title>{long}: 1</title>")),
            "{named}"
        );
        assert!(named.contains(&bar_label(long)), "{named}");
        assert_eq!(bar_label(long), "lab c=1000 d=adaptive oa=16384");
        assert_eq!(
            bar_label("java_hotspot_grpc_pgc_direct concurrency=10 offload-above=16384"),
            "java_ho… c=10 oa=16384"
        );
        assert_eq!(bar_label("rust_tonic_mt"), "rust_tonic_mt");
        let plain = bar_label("a_very_long_implementation_name_without_settings_at_all");
        assert!(
            plain.contains('…') && plain.chars().count() == BAR_LABEL_CHARS,
            "{plain}"
        );
        // A one-point series is drawn as a dot.
        let one = [Series {
            name: "lab".into(),
            points: vec![(0.0, 5.0)],
        }];
        let dot = line_chart(&LineChart {
            title: "calls",
            x_label: "second",
            y_label: "calls",
            series: &one,
            x_scale: XScale::Linear,
            y_format: trim_number,
            x_names: &[],
        })
        .unwrap();
        assert!(
            dot.contains("<circle") && dot.matches("<circle").count() >= 2,
            "{dot}"
        );
        // An interval of a few rounds running to 10^35: the axis stays near the ratios, the
        // cut end is an arrowhead, and the tooltip keeps the true bounds.
        let wild = forest_chart(
            "req/s",
            &[Estimate {
                label: "B / A".into(),
                ratio: 1.1,
                low: 0.0,
                high: 1.47e35,
            }],
        )
        .unwrap();
        assert!(wild.contains("<polygon"), "{wild}");
        assert!(!wild.contains(">100000"), "axis labels stay short");
        assert!(
            wild.contains("147000000000000"),
            "the tooltip keeps the bound"
        );
        // Ratios from 0.003 to 400: a log axis with short labels, 1 among them.
        let spread = forest_chart(
            "spread",
            &[
                Estimate {
                    label: "B req/s".into(),
                    ratio: 0.003,
                    low: 0.002,
                    high: 0.004,
                },
                Estimate {
                    label: "B p50".into(),
                    ratio: 383.5,
                    low: 343.4,
                    high: 428.4,
                },
            ],
        )
        .unwrap();
        assert!(spread.contains("log scale"), "{spread}");
        let labels: Vec<&str> = spread.lines().map(str::trim).collect();
        for tick in ["0.01", "1", "100"] {
            assert!(labels.contains(&tick), "tick {tick}: {spread}");
        }
        assert!(!labels.contains(&"0.000"), "no ratio collapses to 0.000");
        assert_eq!(significant(0.0031623), "0.00316");
        assert_eq!(significant(31.6228), "31.6");
        assert_eq!(significant(1000.0), "1000");
        assert_eq!(significant(1.0), "1");
        let empty = LineChart {
            title: "empty",
            x_label: "",
            y_label: "",
            series: &[],
            x_scale: XScale::Linear,
            y_format: trim_number,
            x_names: &[],
        };
        assert!(line_chart(&empty).is_err());
    }
}
