//! `probelake plot`: charts of synthesized runs come out as valid SVG and PNG that show
//! something, and the heatmap's data says where the injected bug is.

use std::path::{Path, PathBuf};

use probelake_plot::{fetch_divergence, Cell, DivergenceQuery, RowsBy};
use probelake_query::{Run, RunSession};
use probelake_synth::{write_run, SynthSpec};

use crate::cli;

/// Two imported runs of the demo model over four steps; `bug` has its last layer's attention
/// scale off by 1 %.
fn two_runs(dir: &Path) -> (PathBuf, PathBuf) {
    let spec = SynthSpec { global_steps: vec![1, 2, 3, 4], ..SynthSpec::demo() };
    let mut lakes = Vec::new();
    for (name, bug) in [("base", None), ("bug", Some((1usize, 1.01f32)))] {
        let src = dir.join("src").join(name);
        write_run(&SynthSpec { attention_scale_bug: bug, ..spec.clone() }, &src).expect("synth");
        let lake = dir.join(name);
        cli::import(&src, &lake);
        lakes.push(lake);
    }
    let bug = lakes.pop().expect("two runs");
    let base = lakes.pop().expect("two runs");
    (base, bug)
}

/// Parses the SVG as XML and returns (width, height, every text node).
fn check_svg(path: &Path) -> (u32, u32, String) {
    let text = std::fs::read_to_string(path).expect("read svg");
    let doc = roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{}: not XML: {e}", path.display()));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    let dim = |a: &str| root.attribute(a).and_then(|v| v.parse().ok()).expect("svg width/height");
    let texts: Vec<&str> = doc.descendants().filter(|n| n.has_tag_name("text")).filter_map(|n| n.text()).collect();
    (dim("width"), dim("height"), texts.iter().map(|t| t.trim()).collect::<Vec<_>>().join("\n"))
}

/// Decodes the PNG and returns (width, height, RGB pixels).
fn decode_png(path: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let file = std::fs::File::open(path).expect("open png");
    let mut reader = png::Decoder::new(std::io::BufReader::new(file)).read_info().expect("a PNG header");
    let mut buf = vec![0; reader.output_buffer_size().expect("buffer size")];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    assert_eq!(info.color_type, png::ColorType::Rgb);
    let pixels = buf[..info.buffer_size()].chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
    (info.width, info.height, pixels)
}

/// Asserts the PNG is not blank: a fair share of non-white pixels and many colours.
fn assert_drawn(pixels: &[[u8; 3]]) {
    let inked = pixels.iter().filter(|p| **p != [255, 255, 255]).count();
    assert!(inked * 50 > pixels.len(), "only {inked} of {} pixels drawn", pixels.len());
    let mut colors: Vec<[u8; 3]> = pixels.to_vec();
    colors.sort_unstable();
    colors.dedup();
    assert!(colors.len() > 20, "{} colours", colors.len());
}

fn has_color(pixels: &[[u8; 3]], want: [u8; 3]) -> bool {
    pixels.iter().any(|p| p.iter().zip(want).all(|(a, b)| a.abs_diff(b) <= 6))
}

#[test]
fn trend_writes_svg_and_png_with_one_line_per_run() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (base, bug) = two_runs(tmp.path());
    let out = tmp.path().join("charts/trend");
    std::fs::create_dir_all(tmp.path().join("charts")).expect("mkdir");
    let run = |name: &str, p: &Path| format!("{name}={}", p.display());
    cli::ok([
        "plot",
        "trend",
        "--run",
        &run("base", &base),
        "--run",
        &run("bug", &bug),
        "--op",
        "Functional.linear",
        "--stat",
        "max,norm",
        "--stage",
        "actor_update",
        "-o",
        &out.display().to_string(),
        "-q",
    ]);
    let (w, h, texts) = check_svg(&out.with_extension("svg"));
    for want in ["Functional.linear: max, norm across training steps", "training step", "base", "bug", "4"] {
        assert!(texts.lines().any(|l| l == want), "no text `{want}` in\n{texts}");
    }
    let (pw, ph, pixels) = decode_png(&out.with_extension("png"));
    assert_eq!((pw, ph), (w, h));
    assert_drawn(&pixels);
    // The first two line colours (matplotlib's blue and orange) are on the picture.
    assert!(has_color(&pixels, [0x1f, 0x77, 0xb4]) && has_color(&pixels, [0xff, 0x7f, 0x0e]));
}

#[test]
fn divergence_heatmap_shows_where_the_bug_is() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (base, bug) = two_runs(tmp.path());
    let out = tmp.path().join("heat.png");
    cli::ok([
        Path::new("plot"),
        Path::new("divergence"),
        &bug,
        &base,
        Path::new("--stage"),
        Path::new("actor_update"),
        Path::new("-o"),
        &out,
        Path::new("-q"),
    ]);
    assert!(!tmp.path().join("heat.svg").exists(), "a .png path writes the PNG only");
    let (w, h, pixels) = decode_png(&out);
    assert!(w >= 700 && h >= 300, "{w}x{h}");
    assert_drawn(&pixels);
    // Agreement (the scale's pale end) and large errors (its red half) are both there.
    assert!(has_color(&pixels, [0xff, 0xff, 0xcc]), "no pale cells");
    assert!(pixels.iter().any(|p| p[0] > 0xb0 && p[1] < 0x60 && p[2] < 0x60), "no red cells");

    let svg = tmp.path().join("heat2.svg");
    cli::ok([Path::new("plot"), Path::new("divergence"), &bug, &base, Path::new("-o"), &svg, Path::new("-q")]);
    let (_, _, texts) = check_svg(&svg);
    for want in ["Relative error of forward outputs: bug against base", "training step", "relative error"] {
        assert!(texts.lines().any(|l| l == want), "no text `{want}` in\n{texts}");
    }
}

#[tokio::test]
async fn heatmap_rows_agree_before_the_bug_and_part_after() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (base, bug) = two_runs(tmp.path());
    let lake = |p: &Path| probelake_format::Lake::open(&p.display().to_string()).expect("open");
    let session = RunSession::open(vec![Run::new("bug", lake(&bug)), Run::new("base", lake(&base))], false)
        .await
        .expect("session");
    let query = DivergenceQuery { stage: Some("actor_compute_log_prob".into()), ..DivergenceQuery::new("bug", "base") };
    let map = fetch_divergence(&session, &query).await.expect("heatmap");
    assert_eq!(map.columns, [1, 2, 3, 4]);
    assert!(map.rows.windows(2).all(|w| w[0].first_seq <= w[1].first_seq), "rows in execution order");
    let row = |name: &str| map.rows.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("no row {name}"));
    // Layer 0 runs before the bug (layer 1's attention scale): identical in both runs.
    assert!(row("Functional.embedding.0").cells.iter().all(|c| *c == Cell::Rel(0.0)));
    assert!(row("Functional.softmax.0").cells.iter().all(|c| *c == Cell::Rel(0.0)));
    // Layer 1's softmax takes the scaled scores: it differs at every step.
    assert!(row("Functional.softmax.1").cells.iter().all(|c| matches!(c, Cell::Rel(x) if *x > 1e-6)));

    let by_op = DivergenceQuery { rows: RowsBy::Op, max_rows: 3, ..query };
    let map = fetch_divergence(&session, &by_op).await.expect("heatmap by op");
    assert_eq!(map.rows.len(), 3);
    assert!(map.total_rows > 3);
    assert!(map.rows.iter().all(|r| !r.name.contains(".0")), "{:?}", map.rows);
}

#[test]
fn an_unknown_op_is_an_error_with_the_nearest_names() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (base, _) = two_runs(tmp.path());
    let out = tmp.path().join("t");
    let done = cli::probelake([
        Path::new("plot"),
        Path::new("trend"),
        &base,
        Path::new("--op"),
        Path::new("Functional.layernorm"),
        Path::new("-o"),
        &out,
    ]);
    assert_eq!(done.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(stderr.contains("no forward output of op `Functional.layernorm`"), "{stderr}");
    assert!(stderr.contains("hint: the nearest names there are: Functional.layer_norm"), "{stderr}");
    assert!(!out.with_extension("svg").exists() && !out.with_extension("png").exists());
}
