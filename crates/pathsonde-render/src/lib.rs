//! pathsonde's printer: everything that turns a result into what a person
//! reads — text reports, the HTML page of an archived run, plots (SVG and
//! PNG), the mesh matrix — kept out of the `pathsonde` binary, which is left
//! with argument parsing, dispatch and exit codes (as ripgrep keeps its
//! printing in `grep-printer`).
//!
//! Two kinds of input come here.  A fresh measurement arrives typed, as the
//! library crates return it (`pathsonde_net::MeasurementRun` for
//! [`report`], `MeasureRun` and `MbsMeasurement` for [`measure`],
//! `CapacityRun` for [`capacity`] and [`udpst_json`], `FlowResult` for
//! [`flow`], `HostReport` for [`host`], `pathsonde_lab::run::LabRunReport`,
//! `pathsonde_lab::compare::CompareReport` for [`compare`] and
//! [`compare_plot`], `pathsonde_sim`'s runs for [`sim`], a latency trace's analysis for
//! [`trace`], the mesh
//! [`mesh_view::Matrix`]).  An archived run arrives as the stored JSON
//! document; [`view`] reads any such document by shape (headline, main
//! table), and [`archived`] reads the fields each picture needs through
//! typed views, so a renamed field is an error, not an empty plot.
//!
//! Nothing here measures, reads the network or the archive, or exits.

#![forbid(unsafe_code)]
// Every public item says what it is for: this crate is the binary's printer
// and the first place a newcomer looks for how a result is shown.
#![warn(missing_docs)]

/// Why a picture could not be drawn: no font for its text, or the drawing
/// backend's own failure (an unwritable file, say), in its words.  Every
/// plot of the CLI — `plot`, `report --html`, `compare`'s figures, `sim
/// --plot` — fails with this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrawError {
    /// No TrueType font was found; the message says how to get one.
    #[error("{0}")]
    NoFont(String),
    /// plotters' error, as it words it.
    #[error("{0}")]
    Draw(String),
}

impl DrawError {
    /// The drawing backend's error `e`.
    pub(crate) fn draw(e: impl std::fmt::Display) -> DrawError {
        DrawError::Draw(e.to_string())
    }
}

pub mod archived;
pub mod capacity;
pub mod compare;
pub mod compare_plot;
pub mod flow;
pub mod font;
pub mod host;
pub mod html;
pub mod measure;
pub mod mesh_view;
pub mod plot;
pub mod precision;
pub mod report;
pub mod sim;
pub mod trace;
pub mod trust;
pub mod udpst_json;
pub mod view;

// Issue 31, moved out of the binary: the printers of `hops`, of `lab run
// --method hops|capacity` and the standing labs, and of the archive's
// `history`, `show`, `export` and `plot`.
pub mod hops;
pub mod hops_lab;
pub mod lab_capacity;
pub mod lab_standing;
pub mod plot_files;
pub mod show;
pub mod summary;
