//! The report's charts (PNG, with `plotters`): acquire latency against concurrency, and
//! readiness detection by the provider's watch against two polls. Text is drawn with a system
//! TrueType font (DejaVu Sans); without one, no chart is drawn and the report says so.

use std::path::{Path, PathBuf};
use std::time::Duration;

use plotters::prelude::*;
use plotters::style::FontStyle;

/// What the charts draw, collected while the sections run.
#[derive(Debug, Clone, Default)]
pub struct ChartData {
    /// (concurrency, acquire p50, acquire p99) of each load level.
    pub latency: Vec<(usize, Duration, Duration)>,
    /// (label, p50) of the provider's watch and of each poll, per backend.
    pub readiness: Vec<(String, Duration)>,
}

const FONTS: [&str; 3] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

fn register_font() -> bool {
    let Some(bytes) = FONTS.iter().find_map(|p| std::fs::read(p).ok()) else {
        return false;
    };
    plotters::style::register_font("sans-serif", FontStyle::Normal, Box::leak(bytes.into_boxed_slice())).is_ok()
}

/// The folder the charts go to, beside the report.
fn chart_dir(report: &Path) -> PathBuf {
    report.parent().unwrap_or(Path::new(".")).join("host-harness/provider-bench/charts")
}

/// Draws the charts that have data; returns the Markdown that shows them in the report.
pub fn draw(data: &ChartData, report: &Path) -> anyhow::Result<String> {
    if data.latency.is_empty() && data.readiness.is_empty() {
        return Ok(String::new());
    }
    if !register_font() {
        return Ok(format!("\nNo charts: none of the fonts {} is on this machine.\n", FONTS.join(", ")));
    }
    let dir = chart_dir(report);
    std::fs::create_dir_all(&dir)?;
    let mut out = String::from("### Charts\n\n");
    if data.latency.len() > 1 {
        let path = dir.join("load-latency.png");
        latency(&data.latency, &path)?;
        out.push_str("![acquire latency against concurrency](host-harness/provider-bench/charts/load-latency.png)\n\n");
    }
    if !data.readiness.is_empty() {
        let path = dir.join("readiness.png");
        readiness(&data.readiness, &path)?;
        out.push_str(
            "![readiness detection: watch against polls](host-harness/provider-bench/charts/readiness.png)\n\n",
        );
    }
    Ok(out)
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn latency(points: &[(usize, Duration, Duration)], path: &Path) -> anyhow::Result<()> {
    let root = BitMapBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let max_c = points.iter().map(|p| p.0).max().unwrap_or(1) as f64;
    let max_ms = points.iter().map(|p| millis(p.2)).fold(1.0, f64::max) * 1.2;
    let mut chart = ChartBuilder::on(&root)
        .caption("acquire latency against concurrency", ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d((1.0..max_c * 1.5).log_scale(), (0.1..max_ms).log_scale())?;
    chart.configure_mesh().x_desc("concurrent lifecycles").y_desc("ms").draw()?;
    let p50: Vec<(f64, f64)> = points.iter().map(|p| (p.0 as f64, millis(p.1).max(0.1))).collect();
    let p99: Vec<(f64, f64)> = points.iter().map(|p| (p.0 as f64, millis(p.2).max(0.1))).collect();
    chart
        .draw_series(LineSeries::new(p50.clone(), BLUE.stroke_width(2)))?
        .label("p50")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLUE.stroke_width(2)));
    chart.draw_series(p50.iter().map(|p| Circle::new(*p, 4, BLUE.filled())))?;
    chart
        .draw_series(LineSeries::new(p99.clone(), RED.stroke_width(2)))?
        .label("p99")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], RED.stroke_width(2)));
    chart.draw_series(p99.iter().map(|p| Circle::new(*p, 4, RED.filled())))?;
    chart.configure_series_labels().background_style(WHITE).border_style(BLACK).draw()?;
    root.present()?;
    Ok(())
}

fn readiness(bars: &[(String, Duration)], path: &Path) -> anyhow::Result<()> {
    let root = BitMapBackend::new(path, (900, 60 + 44 * bars.len() as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let max_ms = bars.iter().map(|b| millis(b.1)).fold(1.0, f64::max) * 2.0;
    let top = bars.len() as f64 - 0.5;
    let mut chart = ChartBuilder::on(&root)
        .caption("cluster Ready -> seen, p50 (ms, log scale)", ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(36)
        .y_label_area_size(220)
        .build_cartesian_2d((0.1..max_ms).log_scale(), -0.5..top)?;
    let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    let label = |y: &f64| {
        let i = y.round();
        if (y - i).abs() > 0.01 || i < 0.0 {
            return String::new();
        }
        labels.get(i as usize).cloned().unwrap_or_default()
    };
    chart.configure_mesh().disable_y_mesh().y_labels(bars.len()).y_label_formatter(&label).draw()?;
    chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
        let y = i as f64;
        Rectangle::new([(0.1, y - 0.35), (millis(b.1).max(0.1), y + 0.35)], BLUE.mix(0.6).filled())
    }))?;
    root.present()?;
    Ok(())
}
