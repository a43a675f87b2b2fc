//! A chart's title and its subtitle, wrapped to the chart's width.

use plotters::backend::DrawingBackend;
use plotters::coord::Shift;
use plotters::drawing::DrawingArea;
use plotters::style::{IntoFont, RGBColor, BLACK};

use crate::error::{PlotError, Result};
use crate::font::{ensure_registered, FAMILY};

const TITLE_SIZE: u32 = 21;
const SUBTITLE_SIZE: u32 = 14;
const LINE_HEIGHT: i32 = 19;
const GREY: RGBColor = RGBColor(0x55, 0x55, 0x55);

/// The title line and the subtitle lines.
pub(crate) struct Header {
    title: String,
    lines: Vec<String>,
}

impl Header {
    /// Lays out `parts` of the subtitle, joined by ` · `, in lines at most `width` pixels wide.
    pub(crate) fn new(title: String, parts: &[String], width: u32) -> Result<Self> {
        ensure_registered()?;
        let font = (FAMILY, SUBTITLE_SIZE).into_font();
        let fits = |text: &str| -> Result<bool> {
            let (w, _) = font.box_size(text).map_err(|e| PlotError::Draw(e.to_string()))?;
            Ok(w <= width)
        };
        let mut lines: Vec<String> = Vec::new();
        for part in parts {
            match lines.last_mut() {
                Some(line) if fits(&format!("{line} · {part}"))? => {
                    line.push_str(" · ");
                    line.push_str(part);
                }
                _ => lines.push(part.clone()),
            }
        }
        Ok(Header { title, lines })
    }

    /// Its height in pixels, space below included.
    pub(crate) fn height(&self) -> i32 {
        44 + LINE_HEIGHT * self.lines.len() as i32 + 10
    }

    /// Draws it at the top of `root`.
    pub(crate) fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        root.draw_text(&self.title, &(FAMILY, TITLE_SIZE).into_font().color(&BLACK), (16, 10))?;
        for (i, line) in self.lines.iter().enumerate() {
            let y = 40 + LINE_HEIGHT * i as i32;
            root.draw_text(line, &(FAMILY, SUBTITLE_SIZE).into_font().color(&GREY), (16, y))?;
        }
        Ok(())
    }
}
