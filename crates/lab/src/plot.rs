//! SVG plots of lab results, written by hand (no plotting dependency): bars with min-max
//! whiskers for configuration sets, or a line over a swept parameter (rules, flows, states).

use std::fmt::Write;

/// One bar: a set's name, median and the min and max of its runs (pps).
pub struct Bar<'a> {
    pub label: &'a str,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

const W: f64 = 720.0;
const H: f64 = 420.0;
const LEFT: f64 = 80.0;
const BOTTOM: f64 = 90.0;
const TOP: f64 = 50.0;
const RIGHT: f64 = 20.0;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A "nice" upper bound for the axis and its tick step.
fn axis(max: f64) -> (f64, f64) {
    let max = if max > 0.0 && max.is_finite() { max } else { 1.0 };
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| s * 5.0 >= max)
        .unwrap_or(10.0 * mag);
    (step * (max / step).ceil(), step)
}

fn fmt_pps(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.0} k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

fn frame(svg: &mut String, title: &str, y_label: &str, top: f64) -> impl Fn(f64) -> f64 + use<> {
    let (ymax, step) = axis(top);
    let plot_h = H - TOP - BOTTOM;
    let y = move |v: f64| H - BOTTOM - v / ymax * plot_h;
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(
        svg,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{}" y="25" text-anchor="middle" font-size="15">{}</text>"#,
        W / 2.0,
        escape(title)
    );
    let mut v = 0.0;
    while v <= ymax + step / 2.0 {
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            y(v) + 4.0,
            fmt_pps(v),
            y = y(v)
        );
        v += step;
    }
    let _ = write!(
        svg,
        r#"<text transform="translate(18 {}) rotate(-90)" text-anchor="middle">{}</text>"#,
        TOP + plot_h / 2.0,
        escape(y_label)
    );
    y
}

/// Bars with min-max whiskers, one per set.
pub fn bars(title: &str, bars: &[Bar<'_>]) -> String {
    let mut svg = String::new();
    let top = bars.iter().map(|b| b.max.max(b.median)).fold(0.0, f64::max);
    let y = frame(&mut svg, title, "packets per second (median of runs, min-max)", top);
    let slot = (W - LEFT - RIGHT) / bars.len().max(1) as f64;
    for (i, b) in bars.iter().enumerate() {
        let x = LEFT + slot * i as f64 + slot * 0.2;
        let w = slot * 0.6;
        let cx = x + w / 2.0;
        let _ = write!(
            svg,
            r##"<rect x="{x:.1}" y="{:.1}" width="{w:.1}" height="{:.1}" fill="#4a7ab7"/>"##,
            y(b.median),
            y(0.0) - y(b.median)
        );
        let _ = write!(
            svg,
            r##"<line x1="{cx:.1}" x2="{cx:.1}" y1="{:.1}" y2="{:.1}" stroke="#222"/><line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#222"/><line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#222"/>"##,
            y(b.min),
            y(b.max),
            cx - 6.0,
            cx + 6.0,
            y(b.min),
            y(b.min),
            cx - 6.0,
            cx + 6.0,
            y(b.max),
            y(b.max)
        );
        let _ = write!(
            svg,
            r#"<text x="{cx:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            y(b.max) - 6.0,
            fmt_pps(b.median)
        );
        let _ = write!(
            svg,
            r#"<text x="{cx:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            H - BOTTOM + 18.0,
            escape(b.label)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// One line per series over a swept parameter: (x, median pps) points.
pub fn lines(title: &str, x_label: &str, series: &[(&str, Vec<(f64, f64)>)]) -> String {
    let mut svg = String::new();
    let top = series.iter().flat_map(|(_, p)| p.iter().map(|&(_, v)| v)).fold(0.0, f64::max);
    let y = frame(&mut svg, title, "packets per second (median)", top);
    let xs: Vec<f64> = series.iter().flat_map(|(_, p)| p.iter().map(|&(x, _)| x)).collect();
    let (xmin, xmax) = xs.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    let log = xmin > 0.0 && xmax / xmin >= 100.0; // rule counts and table sizes span decades
    let t = |x: f64| if log { x.log10() } else { x };
    let (t0, t1) = (t(xmin), t(xmax).max(t(xmin) + 1e-9));
    let x = |v: f64| LEFT + (t(v) - t0) / (t1 - t0) * (W - LEFT - RIGHT - 20.0) + 10.0;
    let colours = ["#4a7ab7", "#c0504d", "#9bbb59", "#8064a2", "#f79646"];
    let mut ticks: Vec<f64> = xs.clone();
    ticks.sort_by(f64::total_cmp);
    ticks.dedup();
    for &v in &ticks {
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{v}</text>"#,
            x(v),
            H - BOTTOM + 18.0
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">{}{}</text>"#,
        W / 2.0,
        H - BOTTOM + 40.0,
        escape(x_label),
        if log { " (log scale)" } else { "" }
    );
    for (i, (name, points)) in series.iter().enumerate() {
        let c = colours[i % colours.len()];
        let path: Vec<String> =
            points.iter().map(|&(px, py)| format!("{:.1},{:.1}", x(px), y(py))).collect();
        let _ = write!(
            svg,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        for &(px, py) in points {
            let _ =
                write!(svg, r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{c}"/>"#, x(px), y(py));
        }
        let _ = write!(
            svg,
            r#"<text x="{}" y="{}" fill="{c}">{}</text>"#,
            LEFT + 10.0 + 150.0 * i as f64,
            H - 20.0,
            escape(name)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_is_nice() {
        assert_eq!(axis(637_000.0), (800_000.0, 200_000.0));
        assert_eq!(axis(9.6e6), (1e7, 2e6));
        assert_eq!(axis(0.0), (1.0, 0.2));
    }

    #[test]
    fn bars_and_lines_are_well_formed_svg() {
        let svg = bars(
            "kernel vs linerate",
            &[
                Bar { label: "kernel", median: 6.1e5, min: 5.9e5, max: 6.3e5 },
                Bar { label: "<lr>", median: 1.2e6, min: 1.1e6, max: 1.3e6 },
            ],
        );
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("&lt;lr&gt;") && svg.contains("1.20 M"));
        let svg = lines(
            "rules",
            "rules",
            &[
                ("nft", vec![(1.0, 5e5), (1000.0, 2e4)]),
                ("linerate", vec![(1.0, 1e6), (1000.0, 1e6)]),
            ],
        );
        assert!(svg.contains("log scale") && svg.matches("<polyline").count() == 2);
    }
}
