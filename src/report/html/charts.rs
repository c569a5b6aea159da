//! Charts as inline SVG, drawn with plotters' SVG backend. Its text is SVG
//! `<text>` set in the browser's sans-serif (plotters only estimates sizes
//! for layout), so no font files or fontconfig are needed to make them.

use plotters::coord::ranged1d::{SegmentValue, SegmentedCoord};
use plotters::coord::types::RangedCoordu32;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::report::tables::summary::matrix_unit;
use crate::report::ReportError;
use crate::result::PairMatrix;
use crate::scenario::Mode;
use crate::units::number;
use crate::units::ByteSize;

const FONT: &str = "sans-serif";
const MESH: RGBColor = RGBColor(0xee, 0xee, 0xee);
/// A matrix cell with no value.
const NO_VALUE: RGBColor = RGBColor(0xee, 0xee, 0xee);
/// Tableau 10: tells lines apart, also for the colour-blind.
const PALETTE: [RGBColor; 10] = [
    RGBColor(0x4e, 0x79, 0xa7),
    RGBColor(0xf2, 0x8e, 0x2b),
    RGBColor(0xe1, 0x57, 0x59),
    RGBColor(0x76, 0xb7, 0xb2),
    RGBColor(0x59, 0xa1, 0x4f),
    RGBColor(0xed, 0xc9, 0x48),
    RGBColor(0xb0, 0x7a, 0xa1),
    RGBColor(0xff, 0x9d, 0xa7),
    RGBColor(0x9c, 0x75, 0x5f),
    RGBColor(0xba, 0xb0, 0xac),
];

/// `n` slots, 0..n − 1: plotters' integer ranges include their end.
fn segments(n: u32) -> SegmentedCoord<RangedCoordu32> {
    (0..n.max(1) - 1).into_segmented()
}

fn failed(e: impl std::fmt::Display) -> ReportError {
    ReportError::Encode { what: "a chart", reason: e.to_string() }
}

/// A named line: (x, y) points and, where `errors` has one for a point
/// (same index), an error bar from its low to its high y (a 95 % interval).
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub errors: Vec<Option<(f64, f64)>>,
}

impl Series {
    /// A line without error bars.
    pub fn plain(name: String, points: Vec<(f64, f64)>) -> Series {
        Series { name, points, errors: Vec::new() }
    }
}

/// Vertical bars, one per label, with a line across at `reference` (a fair
/// share, a baseline) and, where `errors` has one for the bar, an error
/// bar from its low to its high (a 95 % interval).
pub fn bars(
    title: &str,
    y_desc: &str,
    labels: &[String],
    values: &[f64],
    reference: Option<f64>,
    errors: &[Option<(f64, f64)>],
) -> Result<String, ReportError> {
    let mut svg = String::new();
    {
        let width = (160 + 70 * labels.len()).clamp(480, 900) as u32;
        let root = SVGBackend::with_string(&mut svg, (width, 320)).into_drawing_area();
        root.fill(&WHITE).map_err(failed)?;
        let highest = errors.iter().flatten().map(|e| e.1).fold(0.0, f64::max);
        let top = values.iter().copied().fold(highest, f64::max).max(reference.unwrap_or(0.0)).max(1e-9) * 1.2;
        let n = labels.len() as u32;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(62)
            .build_cartesian_2d(segments(n), 0f64..top)
            .map_err(failed)?;
        let label = |v: &SegmentValue<u32>| match v {
            SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(MESH)
            .x_labels(labels.len() + 1)
            .x_label_formatter(&label)
            .y_desc(y_desc)
            .label_style((FONT, 15))
            .draw()
            .map_err(failed)?;
        let color = RGBColor(0x3b, 0x6e, 0xa8);
        chart
            .draw_series(values.iter().enumerate().map(|(i, &v)| {
                let i = i as u32;
                let mut bar =
                    Rectangle::new([(SegmentValue::Exact(i), 0.0), (SegmentValue::Exact(i + 1), v)], color.filled());
                bar.set_margin(0, 0, 8, 8);
                bar
            }))
            .map_err(failed)?;
        chart
            .draw_series(values.iter().enumerate().map(|(i, &v)| {
                Text::new(
                    number(v, 2),
                    (SegmentValue::CenterOf(i as u32), v),
                    (FONT, 14).into_font().into_text_style(&root).pos(Pos::new(HPos::Center, VPos::Bottom)),
                )
            }))
            .map_err(failed)?;
        chart
            .draw_series(values.iter().zip(errors).enumerate().filter_map(|(i, (&v, e))| {
                let (low, high) = (*e)?;
                let x = SegmentValue::CenterOf(i as u32);
                Some(ErrorBar::new_vertical(x, low.max(0.0), v, high, BLACK.stroke_width(2), 12))
            }))
            .map_err(failed)?;
        if let Some(r) = reference {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(SegmentValue::Exact(0), r), (SegmentValue::Exact(n), r)],
                    BLACK.stroke_width(2),
                )))
                .map_err(failed)?;
        }
        root.present().map_err(failed)?;
    }
    Ok(svg)
}

/// Lines over a shared x axis, y in `y_desc`; `sizes` draws x as message
/// sizes on a log2 axis.
pub fn lines(title: &str, x_desc: &str, y_desc: &str, series: &[Series], sizes: bool) -> Result<String, ReportError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (620, 320)).into_drawing_area();
        root.fill(&WHITE).map_err(failed)?;
        let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
        let (x0, x1) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
        let (x0, x1) = if x0.is_finite() { (x0, x1.max(x0 + 1e-9)) } else { (0.0, 1.0) };
        let pad = if sizes { 0.5 } else { 0.0 };
        let highest =
            series.iter().flat_map(|s| s.points.iter().map(|p| p.1).chain(s.errors.iter().flatten().map(|e| e.1)));
        let top = highest.fold(0.0, f64::max).max(1e-9) * 1.12;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 19))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(62)
            .build_cartesian_2d((x0 - pad)..(x1 + pad), 0f64..top)
            .map_err(failed)?;
        let size_label = |x: &f64| {
            let near = x.round();
            if (x - near).abs() < 1e-6 && near >= 0.0 {
                ByteSize(2f64.powf(near) as u64).to_string()
            } else {
                String::new()
            }
        };
        let plain = |x: &f64| format!("{x:.1}");
        let mut mesh = chart.configure_mesh();
        mesh.x_desc(x_desc).y_desc(y_desc).label_style((FONT, 15)).light_line_style(MESH);
        if sizes {
            mesh.x_labels(((x1 - x0) as usize + 2).max(2)).x_label_formatter(&size_label);
        } else {
            mesh.x_label_formatter(&plain);
        }
        mesh.draw().map_err(failed)?;
        for (i, s) in series.iter().enumerate() {
            let color = if s.name == "aggregate" { BLACK } else { PALETTE[i % PALETTE.len()] };
            let width = if s.name == "aggregate" { 3 } else { 2 };
            chart
                .draw_series(LineSeries::new(s.points.clone(), color.stroke_width(width)))
                .map_err(failed)?
                .label(s.name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(width)));
            chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled()))).map_err(failed)?;
            let errors = s.points.iter().zip(&s.errors).filter_map(|(&(x, y), e)| {
                let (low, high) = (*e)?;
                Some(ErrorBar::new_vertical(x, low.max(0.0), y, high, color.stroke_width(2), 10))
            });
            chart.draw_series(errors).map_err(failed)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .label_font((FONT, 14))
            .draw()
            .map_err(failed)?;
        root.present().map_err(failed)?;
    }
    Ok(svg)
}

/// Colour of a cell: green at the best pair, through yellow, to red at half of it and below.
fn shade(share: f64) -> HSLColor {
    let t = ((share - 0.5) / 0.5).clamp(0.0, 1.0);
    HSLColor(t * 120.0 / 360.0, 0.62, 0.62)
}

/// A matrix slot: sender row and receiver column, as plotters addresses it.
type Slot = (SegmentValue<u32>, SegmentValue<u32>);

/// How a matrix cell compares with the best pair of the matrix.
struct Shading {
    mode: Mode,
    /// The best cell: highest Gb/s, or lowest latency.
    best: f64,
}

impl Shading {
    fn of(m: &PairMatrix) -> Self {
        let cells = || m.values.iter().flatten().flatten().copied();
        let best = match m.mode {
            Mode::Bandwidth => cells().fold(0.0, f64::max),
            Mode::Latency => cells().fold(f64::INFINITY, f64::min),
        };
        Shading { mode: m.mode, best }
    }

    /// The cell's fill: its share of the best, grey where it has no value.
    fn fill(&self, v: Option<f64>) -> ShapeStyle {
        match v {
            Some(g) if self.best > 0.0 && g > 0.0 => shade(match self.mode {
                Mode::Bandwidth => g / self.best,
                Mode::Latency => self.best / g,
            })
            .filled(),
            _ => NO_VALUE.filled(),
        }
    }
}

/// The square of the cell that `src` sends to `dst`: row 0 at the top, y = n − 1 − row.
fn cell_square(n: u32, src: u32, dst: u32, style: ShapeStyle) -> Rectangle<Slot> {
    let y = n - 1 - src;
    let mut r = Rectangle::new(
        [
            (SegmentValue::Exact(dst), SegmentValue::Exact(y)),
            (SegmentValue::Exact(dst + 1), SegmentValue::Exact(y + 1)),
        ],
        style,
    );
    r.set_margin(1, 1, 1, 1);
    r
}

/// The all-pairs matrix: rows send, columns receive, each cell coloured by
/// how close it is to the best pair (highest Gb/s, lowest latency) and
/// labelled with its value. Hosts in `marked` (the suspects) get a `*`.
pub fn heatmap(m: &PairMatrix, marked: &[usize]) -> Result<String, ReportError> {
    let n = m.hosts.len() as u32;
    let cell = (640 / n.max(1)).clamp(14, 72);
    let label_area = 16 + 8 * m.hosts.iter().map(|h| h.len()).max().unwrap_or(2).min(24) as u32;
    let side = (cell * n + label_area + 30).max(560);
    let shading = Shading::of(m);
    let name = |i: u32| {
        let host = m.hosts.get(i as usize).cloned().unwrap_or_default();
        if marked.contains(&(i as usize)) {
            format!("{host} *")
        } else {
            host
        }
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (side + 20, side + 50)).into_drawing_area();
        root.fill(&WHITE).map_err(failed)?;
        let title = format!(
            "All pairs `{}`: {}, row sends → column receives (best {:.2})",
            m.group,
            matrix_unit(m),
            shading.best
        );
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 18))
            .margin(10)
            .x_label_area_size(label_area)
            .y_label_area_size(label_area)
            .build_cartesian_2d(segments(n), segments(n))
            .map_err(failed)?;
        // Row 0 at the top: y = n − 1 − row.
        let x_label = |v: &SegmentValue<u32>| match v {
            SegmentValue::CenterOf(i) => name(*i),
            _ => String::new(),
        };
        let y_label = |v: &SegmentValue<u32>| match v {
            SegmentValue::CenterOf(i) if *i < n => name(n - 1 - *i),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(n as usize + 1)
            .y_labels(n as usize + 1)
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .x_desc("receiver")
            .y_desc("sender")
            .label_style((FONT, 15))
            .draw()
            .map_err(failed)?;
        let cells = m
            .values
            .iter()
            .enumerate()
            .flat_map(|(src, row)| row.iter().enumerate().map(move |(dst, v)| (src as u32, dst as u32, *v)));
        chart
            .draw_series(cells.clone().map(|(src, dst, v)| cell_square(n, src, dst, shading.fill(v))))
            .map_err(failed)?;
        if cell >= 30 {
            let style = (FONT, if cell >= 48 { 16 } else { 12 }).into_font().into_text_style(&root);
            let style = style.pos(Pos::new(HPos::Center, VPos::Center));
            chart
                .draw_series(cells.filter_map(|(src, dst, v)| {
                    let g = v?;
                    let at = (SegmentValue::CenterOf(dst), SegmentValue::CenterOf(n - 1 - src));
                    Some(Text::new(number(g, if g >= 100.0 { 0 } else { 2 }), at, style.clone()))
                }))
                .map_err(failed)?;
        }
        root.present().map_err(failed)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SVG shapes drawn: plotters draws an error bar as lines.
    fn shapes(svg: &str) -> usize {
        svg.matches("<line").count() + svg.matches("<polyline").count() + svg.matches("<path").count()
    }

    #[test]
    fn lines_and_bars_draw_an_error_bar_for_each_interval_given() {
        let points = vec![(1.0, 10.0), (2.0, 20.0), (3.0, 30.0)];
        let plain = lines("t", "x", "y", &[Series::plain("a".into(), points.clone())], false).unwrap();
        // Within the points' range, so both charts have the same axes.
        let errors = vec![Some((8.0, 12.0)), None, Some((25.0, 29.0))];
        let with = lines("t", "x", "y", &[Series { name: "a".into(), points: points.clone(), errors }], false).unwrap();
        let per_bar = (shapes(&with) - shapes(&plain)) as f64 / 2.0;
        assert!(per_bar >= 1.0 && per_bar.fract() == 0.0, "two bars, drawn alike: {per_bar} shapes each");
        // An interval above every point: the y axis makes room for it.
        let high = vec![None, None, Some((25.0, 60.0))];
        let tall = lines("t", "x", "y", &[Series { name: "a".into(), points, errors: high }], false).unwrap();
        assert!(tall.contains("\n60.0\n") && !plain.contains("\n60.0\n"), "the y axis reaches the interval's top");

        let labels = vec!["a".to_string(), "b".to_string()];
        let bare = bars("t", "y", &labels, &[1.0, 2.0], None, &[]).unwrap();
        let one = bars("t", "y", &labels, &[1.0, 2.0], None, &[Some((0.5, 1.5)), None]).unwrap();
        assert_eq!(shapes(&one) - shapes(&bare), per_bar as usize, "a bar chart's error bar is the same shape");
    }
}
