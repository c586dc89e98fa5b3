//! The one TrueType font every CLI plot draws its text with.
//!
//! plotters renders text with ab_glyph from a font file we load ourselves, so
//! no fontconfig or freetype is needed.  `PATHSONDE_FONT` names a file;
//! otherwise the usual Debian font packages are tried (`.ci/run` installs
//! fonts-dejavu-core where none is present).  The font is registered once per
//! process, under "sans-serif".

use crate::DrawError;
use std::sync::OnceLock;

const CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
];

/// Loads and registers the plots' font once; the error says how to get one.
pub fn ensure_font() -> Result<(), DrawError> {
    static DONE: OnceLock<Result<(), DrawError>> = OnceLock::new();
    DONE.get_or_init(|| {
        let env = std::env::var("PATHSONDE_FONT").ok();
        let tried: Vec<&str> = env
            .iter()
            .map(String::as_str)
            .chain(CANDIDATES.iter().copied())
            .collect();
        for p in &tried {
            let Ok(bytes) = std::fs::read(p) else { continue };
            // Registered fonts live for the whole process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font(
                "sans-serif",
                plotters::style::FontStyle::Normal,
                bytes,
            )
            .is_ok()
            {
                return Ok(());
            }
        }
        Err(DrawError::NoFont(format!(
            "no TrueType font for the plots (tried {}); install fonts-dejavu-core or set PATHSONDE_FONT=/path/to/font.ttf",
            tried.join(", ")
        )))
    })
    .clone()
}
