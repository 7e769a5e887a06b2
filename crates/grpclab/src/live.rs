//! The live view of a run on a terminal (oha-like): req/s now, the last whole second's p50
//! and p99, errors by status code, and a sparkline of req/s, redrawn four times a second on
//! stderr's alternate screen.
//!
//! It only reads the progress snapshots the load engine's controller thread already builds
//! every 100 ms: the client threads pay for it with one small histogram handed over per
//! second (`LoadConfig::live_latency`), nothing per call. The terminal is not put in raw
//! mode, so Ctrl-C still stops the run (and the screen is restored when the view is dropped).

use std::collections::VecDeque;
use std::io::{IsTerminal, Stderr};
use std::time::{Duration, Instant};

use grpclab_core::Code;
use grpclab_load::{ProgressSnapshot, ProgressTarget};
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Gauge, Paragraph, Sparkline};
use ratatui::{Terminal, TerminalOptions, Viewport};

/// How often the screen is redrawn.
const REDRAW_EVERY: Duration = Duration::from_millis(250);
/// req/s values kept for the sparkline (one a second).
const HISTORY: usize = 240;

/// A live view on stderr; restores the terminal when dropped.
pub struct LiveView {
    terminal: Terminal<CrosstermBackend<Stderr>>,
    title: String,
    history: VecDeque<u64>,
    last_history: Option<Instant>,
    last_draw: Option<Instant>,
    restored: bool,
    /// Progress lines (bench's "[1/3] lab: ..."), shown in a panel and handed back at the end.
    log: Vec<String>,
    /// The last snapshot, to redraw when a line arrives between snapshots.
    last: Option<ProgressSnapshot>,
}

impl LiveView {
    /// Switches stderr to the alternate screen and hides the cursor.
    pub fn start(title: String) -> std::io::Result<LiveView> {
        let mut stderr = std::io::stderr();
        execute!(stderr, terminal::EnterAlternateScreen, cursor::Hide)?;
        let backend = CrosstermBackend::new(stderr);
        // Off a terminal (`--tui` with stderr redirected, to measure the view's cost) a
        // fixed screen: asking a file for its size would make crossterm run `tput` on
        // every frame.
        let terminal = if std::io::stderr().is_terminal() {
            Terminal::new(backend)?
        } else {
            Terminal::with_options(
                backend,
                TerminalOptions {
                    viewport: Viewport::Fixed(Rect::new(0, 0, 100, 32)),
                },
            )?
        };
        Ok(LiveView {
            terminal,
            title,
            history: VecDeque::with_capacity(HISTORY),
            last_history: None,
            last_draw: None,
            restored: false,
            log: Vec::new(),
            last: None,
        })
    }

    /// Adds a progress line to the log panel (and redraws, so it shows at once).
    pub fn log(&mut self, line: &str) {
        self.log.push(line.to_owned());
        let snapshot = self.last.unwrap_or(ProgressSnapshot {
            measured: Duration::ZERO,
            warming_up: true,
            completed: 0,
            errors: 0,
            current_rps: 0.0,
            target: ProgressTarget::Total(0),
            errors_by_code: [0; Code::COUNT],
            last_second: None,
            in_flight: 0,
            offered_rps: None,
            latency_buckets: None,
        });
        self.last_draw = Some(Instant::now());
        let _ = self.draw(&snapshot);
    }

    /// Takes a snapshot; redraws at most every [`REDRAW_EVERY`]. Drawing errors (a closed
    /// terminal) are ignored: the run goes on and its results are written as always.
    pub fn update(&mut self, snapshot: &ProgressSnapshot) {
        self.last = Some(*snapshot);
        let now = Instant::now();
        if self
            .last_history
            .is_none_or(|at| now.duration_since(at) >= Duration::from_secs(1))
        {
            if self.history.len() == HISTORY {
                self.history.pop_front();
            }
            self.history.push_back(snapshot.current_rps.round() as u64);
            self.last_history = Some(now);
        }
        if self
            .last_draw
            .is_some_and(|at| now.duration_since(at) < REDRAW_EVERY)
        {
            return;
        }
        self.last_draw = Some(now);
        let _ = self.draw(snapshot);
    }

    fn draw(&mut self, snapshot: &ProgressSnapshot) -> std::io::Result<()> {
        let history: Vec<u64> = self.history.iter().copied().collect();
        let log: Vec<Line> = self
            .log
            .iter()
            .rev()
            .take(8)
            .rev()
            .map(|line| Line::from(line.as_str()))
            .collect();
        let title = self.title.clone();
        let (ratio, done) = progress(snapshot);
        let phase = if snapshot.warming_up {
            "warming up"
        } else {
            "measuring"
        };
        let latency = match snapshot.last_second {
            Some(second) => format!(
                "second {}: p50 {} · p99 {} ({} calls)",
                second.second,
                millis(second.p50_ns),
                millis(second.p99_ns),
                second.calls
            ),
            None => "p50 / p99: after the first whole second".to_owned(),
        };
        let errors: Vec<Line> = if snapshot.errors == 0 {
            vec![Line::from("none")]
        } else {
            Code::ALL
                .iter()
                .filter(|code| snapshot.errors_by_code[**code as usize] > 0)
                .map(|code| {
                    Line::from(format!(
                        "{:<20} {}",
                        code.name(),
                        snapshot.errors_by_code[*code as usize]
                    ))
                })
                .collect()
        };
        self.terminal.draw(|frame| {
            let [header, gauge, numbers, spark, errs, lines] = Layout::vertical([
                Constraint::Length(1),
                Constraint::Length(3),
                Constraint::Length(5),
                Constraint::Length(8),
                Constraint::Min(3),
                Constraint::Length(if log.is_empty() { 0 } else { 10 }),
            ])
            .areas(frame.area());
            frame.render_widget(
                Paragraph::new(format!("{title} · {phase} · Ctrl-C: stop")),
                header,
            );
            frame.render_widget(
                Gauge::default()
                    .block(Block::default().borders(Borders::ALL).title("progress"))
                    .gauge_style(Style::default().fg(Color::Cyan))
                    .ratio(ratio)
                    .label(done),
                gauge,
            );
            frame.render_widget(
                Paragraph::new(vec![
                    Line::from(format!("req/s now   {:.0}", snapshot.current_rps)),
                    Line::from(format!(
                        "calls       {} ({} failed)",
                        snapshot.completed, snapshot.errors
                    )),
                    Line::from(format!("latency     {latency}")),
                ])
                .block(Block::default().borders(Borders::ALL).title("now")),
                numbers,
            );
            frame.render_widget(
                Sparkline::default()
                    .block(
                        Block::default()
                            .borders(Borders::ALL)
                            .title("req/s, one bar a second"),
                    )
                    .style(Style::default().fg(Color::Green))
                    .data(&history),
                spark,
            );
            frame.render_widget(
                Paragraph::new(errors).block(
                    Block::default()
                        .borders(Borders::ALL)
                        .title("errors by code"),
                ),
                errs,
            );
            if !log.is_empty() {
                frame.render_widget(
                    Paragraph::new(log).block(
                        Block::default()
                            .borders(Borders::ALL)
                            .title("progress lines"),
                    ),
                    lines,
                );
            }
        })?;
        Ok(())
    }

    /// Leaves the alternate screen, showing the cursor again; returns the progress lines
    /// logged, for the caller to print where they stay visible.
    pub fn finish(mut self) -> Vec<String> {
        self.restore();
        std::mem::take(&mut self.log)
    }

    fn restore(&mut self) {
        if !self.restored {
            self.restored = true;
            let _ = execute!(
                self.terminal.backend_mut(),
                cursor::Show,
                terminal::LeaveAlternateScreen
            );
        }
    }
}

impl Drop for LiveView {
    fn drop(&mut self) {
        self.restore();
    }
}

/// How far the run is (0..1) and the gauge's label.
fn progress(snapshot: &ProgressSnapshot) -> (f64, String) {
    match snapshot.target {
        ProgressTarget::Duration(duration) => (
            (snapshot.measured.as_secs_f64() / duration.as_secs_f64().max(1e-9)).clamp(0.0, 1.0),
            format!(
                "{:.1} s of {:.1} s",
                snapshot.measured.as_secs_f64(),
                duration.as_secs_f64()
            ),
        ),
        ProgressTarget::Total(total) => (
            (snapshot.completed as f64 / total.max(1) as f64).clamp(0.0, 1.0),
            format!("{} of {total} calls", snapshot.completed),
        ),
    }
}

fn millis(ns: u64) -> String {
    format!("{:.2} ms", ns as f64 / 1e6)
}
