//! A drawn chart as SVG text and PNG bytes, and how it is written to files.

use std::path::{Path, PathBuf};

use plotters::backend::{BitMapBackend, DrawingBackend, SVGBackend};
use plotters::coord::Shift;
use plotters::drawing::{DrawingArea, IntoDrawingArea};
use plotters::style::WHITE;

use crate::error::{PlotError, Result};

/// A chart, drawn twice from the same description: as SVG and as PNG.
#[derive(Debug, Clone)]
pub struct Figure {
    /// Width in pixels (SVG user units).
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// The SVG document.
    pub svg: String,
    /// The PNG file: 8-bit RGB, `width` × `height`.
    pub png: Vec<u8>,
}

/// Which files [`Figure::save`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Formats {
    /// `<stem>.svg` and `<stem>.png`.
    Both,
    /// The SVG only.
    Svg,
    /// The PNG only.
    Png,
}

impl Figure {
    /// Writes the figure. A path ending in `.svg` or `.png` gets that format only; any other
    /// path is a stem that gets both (`out/trend` → `out/trend.svg`, `out/trend.png`).
    /// Each file is written under a temporary name and renamed, so a failed write never
    /// leaves half a file. Returns the paths written.
    pub fn save(&self, path: &Path) -> Result<Vec<PathBuf>> {
        let (stem, formats) = match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("svg") => (path.with_extension(""), Formats::Svg),
            Some(e) if e.eq_ignore_ascii_case("png") => (path.with_extension(""), Formats::Png),
            _ => (path.to_path_buf(), Formats::Both),
        };
        let mut written = Vec::new();
        if formats != Formats::Png {
            written.push(write_whole(&append_ext(&stem, "svg"), self.svg.as_bytes())?);
        }
        if formats != Formats::Svg {
            written.push(write_whole(&append_ext(&stem, "png"), &self.png)?);
        }
        Ok(written)
    }
}

/// `a/b.c` + `svg` → `a/b.c.svg` (a stem may hold dots of its own).
fn append_ext(stem: &Path, ext: &str) -> PathBuf {
    let mut name = stem.as_os_str().to_owned();
    name.push(".");
    name.push(ext);
    PathBuf::from(name)
}

fn write_whole(path: &Path, bytes: &[u8]) -> Result<PathBuf> {
    let io = |source| PlotError::Io { path: path.to_path_buf(), source };
    let tmp = append_ext(path, "part");
    // A failed write (a full disk) must not leave the partial file behind either.
    std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path)).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })?;
    Ok(path.to_path_buf())
}

/// Something that can draw itself on any plotters backend.
pub(crate) trait Chart {
    /// Its size in pixels.
    fn size(&self) -> (u32, u32);
    /// Draws onto `root`, which is already filled white.
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>;
}

/// Draws `chart` as SVG and as PNG.
pub(crate) fn render(chart: &impl Chart) -> Result<Figure> {
    crate::font::ensure_registered()?;
    let (width, height) = chart.size();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE)?;
        chart.draw(&root)?;
        root.present()?;
    }
    let mut rgb = vec![0u8; width as usize * height as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (width, height)).into_drawing_area();
        root.fill(&WHITE)?;
        chart.draw(&root)?;
        root.present()?;
    }
    Ok(Figure { width, height, svg, png: encode_png(&rgb, width, height)? })
}

fn encode_png(rgb: &[u8], width: u32, height: u32) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    // Charts are mostly flat colour: the slower setting saves about an eighth of the bytes and costs
    // milliseconds at these sizes.
    encoder.set_compression(png::Compression::High);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(rgb)?;
    writer.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_picks_formats_from_the_extension() {
        let dir = tempfile::tempdir().unwrap();
        let fig = Figure { width: 1, height: 1, svg: "<svg/>".into(), png: vec![1, 2, 3] };
        let both = fig.save(&dir.path().join("trend.v2")).unwrap();
        assert_eq!(both, [dir.path().join("trend.v2.svg"), dir.path().join("trend.v2.png")]);
        assert_eq!(fig.save(&dir.path().join("a.SVG")).unwrap(), [dir.path().join("a.svg")]);
        assert_eq!(fig.save(&dir.path().join("b.png")).unwrap(), [dir.path().join("b.png")]);
        assert_eq!(std::fs::read(dir.path().join("b.png")).unwrap(), [1, 2, 3]);
        let err = fig.save(&dir.path().join("missing/c")).unwrap_err();
        assert!(err.to_string().contains("missing/c.svg"), "{err}");
        assert!(!dir.path().join("missing").exists());
    }
}
