//! A hand-written SVG of a run: offered, admitted and included TPS over
//! time and, when the target exposed sluice's pipeline gauges, how far each
//! stage lags behind the producer (in blocks). Polylines, axes, a legend.

use std::fmt::Write as _;

use crate::monitor::Row;

const W: f64 = 900.0;
const PANEL_H: f64 = 260.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const GAP: f64 = 60.0;

/// One line of a panel.
struct Series<'a> {
    name: &'a str,
    color: &'a str,
    points: Vec<(f64, f64)>,
}

/// The SVG for `rows` under `title`.
pub fn svg(title: &str, rows: &[Row]) -> String {
    let t_max = rows.iter().map(|r| r.t_s).fold(1.0, f64::max);
    let tps = vec![
        Series {
            name: "offered",
            color: "#999999",
            points: rows.iter().map(|r| (r.t_s, r.offered_tps)).collect(),
        },
        Series {
            name: "admitted",
            color: "#1f77b4",
            points: rows.iter().map(|r| (r.t_s, r.admitted_tps)).collect(),
        },
        Series {
            name: "included",
            color: "#2ca02c",
            points: rows.iter().map(|r| (r.t_s, r.included_tps)).collect(),
        },
        Series {
            name: "txpool full",
            color: "#d62728",
            points: rows.iter().map(|r| (r.t_s, r.txpool_full_tps)).collect(),
        },
    ];
    let lag = |stage: usize| -> Vec<(f64, f64)> {
        rows.iter()
            .filter_map(|r| r.pipeline.map(|p| (r.t_s, p[0].saturating_sub(p[stage]) as f64)))
            .collect()
    };
    let has_lag = rows.iter().any(|r| r.pipeline.is_some());
    let panels = if has_lag { 2.0 } else { 1.0 };
    let h = TOP + panels * PANEL_H + (panels - 1.0) * GAP + 50.0;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = write!(
        out,
        r#"<text x="{}" y="22" font-size="15" text-anchor="middle">{}</text>"#,
        W / 2.0,
        escape(title)
    );
    panel(&mut out, TOP, "transactions per second", t_max, &tps);
    if has_lag {
        let lags = vec![
            Series { name: "produced - prepared", color: "#9467bd", points: lag(1) },
            Series { name: "produced - executed", color: "#ff7f0e", points: lag(2) },
            Series { name: "produced - committed", color: "#8c564b", points: lag(3) },
        ];
        panel(&mut out, TOP + PANEL_H + GAP, "pipeline lag behind the producer (blocks)", t_max, &lags);
    }
    let _ = write!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">seconds since start</text>"#,
        W / 2.0,
        h - 12.0
    );
    out.push_str("</svg>\n");
    out
}

/// A "nice" axis maximum: 1, 2 or 5 times a power of ten, at least `v`.
pub fn nice_max(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|m| *m >= v).unwrap_or(10.0 * mag)
}

fn panel(out: &mut String, y0: f64, label: &str, t_max: f64, series: &[Series<'_>]) {
    let y_max = nice_max(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(0.0, f64::max));
    let plot_w = W - LEFT - RIGHT;
    let x = |t: f64| LEFT + t / t_max * plot_w;
    let y = |v: f64| y0 + PANEL_H - v / y_max * PANEL_H;
    let _ = write!(
        out,
        r##"<rect x="{LEFT}" y="{y0}" width="{plot_w}" height="{PANEL_H}" fill="none" stroke="#444"/>"##
    );
    for i in 0..=5 {
        let v = y_max * f64::from(i) / 5.0;
        let yy = y(v);
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{yy}" x2="{}" y2="{yy}" stroke="#e5e5e5"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            yy + 4.0,
            fmt_num(v)
        );
    }
    // Round tick steps (1, 2, 5, 10, 20 s ...), not tenths of the run.
    let step = nice_max(t_max / 10.0);
    for i in 0..=(t_max / step).floor() as u32 {
        let t = step * f64::from(i);
        let _ = write!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle">{:.0}</text>"#,
            x(t),
            y0 + PANEL_H + 16.0,
            t
        );
    }
    let _ = write!(
        out,
        r#"<text x="16" y="{}" transform="rotate(-90 16 {})" text-anchor="middle">{}</text>"#,
        y0 + PANEL_H / 2.0,
        y0 + PANEL_H / 2.0,
        escape(label)
    );
    for (i, s) in series.iter().enumerate() {
        let pts: Vec<String> = s.points.iter().map(|&(t, v)| format!("{:.1},{:.1}", x(t), y(v))).collect();
        let _ = write!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.8" points="{}"/>"#,
            s.color,
            pts.join(" ")
        );
        let lx = LEFT + 10.0 + i as f64 * 170.0;
        let _ = write!(
            out,
            r#"<line x1="{lx}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            y0 - 8.0,
            lx + 18.0,
            y0 - 8.0,
            s.color,
            lx + 22.0,
            y0 - 4.0,
            escape(s.name)
        );
    }
}

fn fmt_num(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v.fract().abs() > 1e-9 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_maxima_are_round() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(7.0), 10.0);
        assert_eq!(nice_max(12_300.0), 20_000.0);
        assert_eq!(nice_max(50_000.0), 50_000.0);
    }

    #[test]
    fn svg_has_a_lag_panel_only_with_pipeline_data() {
        let mut rows = vec![Row { t_s: 1.0, admitted_tps: 10.0, ..Default::default() }];
        let plain = svg("a < b", &rows);
        assert!(plain.starts_with("<svg") && plain.contains("a &lt; b") && !plain.contains("committed"));
        rows[0].pipeline = Some([5, 4, 3, 2]);
        assert!(svg("t", &rows).contains("produced - committed"));
    }
}
