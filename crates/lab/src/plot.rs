//! SVG plots of lab results, drawn with `plotters`: bars with min-max whiskers for
//! configuration sets, or a line per series over a swept parameter (rules, flows, states,
//! offered load), on a log axis when the parameter spans decades. Rates read in k/M pps on
//! round ticks; every series is in the legend.

use plotters::coord::Shift;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One bar: a set's name, median and the min and max of its runs (pps).
pub struct Bar<'a> {
    pub label: &'a str,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

const H: u32 = 440;
/// Width per bar: a set name of some 25 characters stays readable under its bar.
const BAR_W: u32 = 145;
const LINES_W: u32 = 760;
const FONT: &str = "sans-serif";
const COLOURS: [RGBColor; 6] = [
    RGBColor(0x4a, 0x7a, 0xb7),
    RGBColor(0xc0, 0x50, 0x4d),
    RGBColor(0x9b, 0xbb, 0x59),
    RGBColor(0x80, 0x64, 0xa2),
    RGBColor(0xf7, 0x96, 0x46),
    RGBColor(0x4b, 0xac, 0xc6),
];

/// A rate as the axes and labels show it: "800 k", "1.20 M".
fn fmt_pps(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.0} k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// The top of a rate axis: the highest value and a tenth above it, for the labels.
fn top(max: f64) -> f64 {
    if max > 0.0 && max.is_finite() { max * 1.12 } else { 1.0 }
}

/// Draws on an SVG canvas of `size`, returning the document. A drawing error leaves a
/// partial plot (the lab's figures are kept in its CSV and JSON anyway).
fn svg(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<(), String>,
) -> String {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        let _ = root.fill(&WHITE);
        if let Err(e) = draw(&root) {
            let _ = root.draw(&Text::new(format!("plot failed: {e}"), (10, 20), (FONT, 14)));
        }
        let _ = root.present();
    }
    out
}

/// Bars with min-max whiskers, one per set, the median above each.
pub fn bars(title: &str, bars: &[Bar<'_>]) -> String {
    // Segments 0..=last, one per bar (an empty plot keeps one).
    let n = bars.len().max(1);
    let last = n as i32 - 1;
    let width = (BAR_W * n as u32 + 100).max(LINES_W);
    let ymax = top(bars.iter().map(|b| b.max.max(b.median)).fold(0.0, f64::max));
    svg((width, H), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((0..last).into_segmented(), 0f64..ymax)
            .map_err(|e| e.to_string())?;
        let name = |v: &SegmentValue<i32>| match v {
            SegmentValue::CenterOf(i) => {
                bars.get(*i as usize).map_or(String::new(), |b| b.label.to_owned())
            }
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .max_light_lines(1)
            .x_labels(n)
            .x_label_formatter(&name)
            .x_label_style((FONT, 13))
            .y_desc("packets per second (median of runs, min-max)")
            .y_label_formatter(&|v| fmt_pps(*v))
            .draw()
            .map_err(|e| e.to_string())?;
        let fill = COLOURS[0].filled();
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                let (l, r) = (SegmentValue::Exact(i as i32), SegmentValue::Exact(i as i32 + 1));
                let mut bar = Rectangle::new([(l, 0.0), (r, b.median)], fill);
                bar.set_margin(0, 0, 18, 18);
                bar
            }))
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                ErrorBar::new_vertical(
                    SegmentValue::CenterOf(i as i32),
                    b.min,
                    b.median,
                    b.max,
                    BLACK.stroke_width(1),
                    12,
                )
            }))
            .map_err(|e| e.to_string())?;
        let label =
            TextStyle::from((FONT, 12).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                Text::new(
                    fmt_pps(b.median),
                    (SegmentValue::CenterOf(i as i32), b.max.max(b.median) * 1.02),
                    label.clone(),
                )
            }))
            .map_err(|e| e.to_string())?;
        Ok(())
    })
}

/// The line plot on x axis `x` (a linear or a log range: two coordinate types, one body).
macro_rules! draw_lines {
    ($root:expr, $title:expr, $x_desc:expr, $x:expr, $ymax:expr, $series:expr) => {{
        let (root, x_desc, series): (
            &DrawingArea<SVGBackend, Shift>,
            &str,
            &[(&str, Vec<(f64, f64)>)],
        ) = ($root, $x_desc, $series);
        let mut chart = ChartBuilder::on(root)
            .caption($title, (FONT, 18))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d($x, 0f64..$ymax)
            .map_err(|e| e.to_string())?;
        let pps = x_desc.contains("pps");
        chart
            .configure_mesh()
            .max_light_lines(1)
            .x_labels(8)
            .x_desc(x_desc)
            .y_desc("packets per second (median)")
            .x_label_formatter(&|v: &f64| if pps { fmt_pps(*v) } else { format!("{v}") })
            .y_label_formatter(&|v: &f64| fmt_pps(*v))
            .draw()
            .map_err(|e| e.to_string())?;
        for (i, (name, points)) in series.iter().enumerate() {
            let c = COLOURS[i % COLOURS.len()];
            chart
                .draw_series(LineSeries::new(points.iter().copied(), c.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(*name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 3, c.filled())))
                .map_err(|e| e.to_string())?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font((FONT, 13))
            .draw()
            .map_err(|e| e.to_string())
    }};
}

/// One line per series over a swept parameter: (x, median pps) points. The x axis is
/// logarithmic when the parameter spans more than a decade and a bit (rule counts, table
/// sizes, offered loads from half a rate to a flood).
pub fn lines(title: &str, x_label: &str, series: &[(&str, Vec<(f64, f64)>)]) -> String {
    let xs = || series.iter().flat_map(|(_, p)| p.iter().map(|&(x, _)| x));
    let (xmin, xmax) = xs().fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let (xmin, xmax) = if xmin <= xmax { (xmin, xmax.max(xmin + 1.0)) } else { (0.0, 1.0) };
    let ymax = top(series.iter().flat_map(|(_, p)| p.iter().map(|&(_, v)| v)).fold(0.0, f64::max));
    let log = xmin > 0.0 && xmax / xmin >= 20.0;
    let x_desc = if log { format!("{x_label} (log scale)") } else { x_label.to_owned() };
    svg((LINES_W, H), |root| {
        if log {
            draw_lines!(root, title, &x_desc, (xmin * 0.9..xmax * 1.1).log_scale(), ymax, series)
        } else {
            let pad = (xmax - xmin) * 0.05;
            draw_lines!(root, title, &x_desc, (xmin - pad).max(0.0)..xmax + pad, ymax, series)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_in_k_and_m() {
        assert_eq!(fmt_pps(637_000.0), "637 k");
        assert_eq!(fmt_pps(1.2e6), "1.20 M");
        assert_eq!(fmt_pps(12.0), "12");
    }

    #[test]
    fn bars_and_lines_are_svg_with_their_names() {
        let svg = bars(
            "kernel vs linerate",
            &[
                Bar { label: "kernel", median: 6.1e5, min: 5.9e5, max: 6.3e5 },
                Bar { label: "<lr>", median: 1.2e6, min: 1.1e6, max: 1.3e6 },
            ],
        );
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("&lt;lr&gt;") && svg.contains("1.20 M"), "{svg}");
        let svg = lines(
            "rules",
            "rules",
            &[
                ("nft", vec![(1.0, 5e5), (1000.0, 2e4)]),
                ("linerate", vec![(1.0, 1e6), (1000.0, 1e6)]),
            ],
        );
        assert!(svg.contains("log scale") && svg.contains("nft") && svg.contains("linerate"));
        // No data at all still makes a document.
        assert!(lines("empty", "x", &[]).contains("</svg>"));
        assert!(bars("empty", &[]).contains("</svg>"));
    }
}
