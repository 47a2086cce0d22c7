//! Quarry's core: binning, Roaring bitmap block indexes and range evaluation.
//!
//! A variable is cut into blocks of `block_len` rows. Each block is indexed on
//! its own ([`block::BlockIndex`]): one Roaring bitmap per non-empty bin, with
//! that bin's count, minimum and maximum *within the block*, a bitmap of
//! missing (NaN) rows, and block statistics. Bin edges are shared by all blocks
//! of a variable ([`binning`]). A range predicate ([`eval::Interval`]) is
//! answered per block: bins whose in-block range lies inside the interval are
//! sure hits, bins that straddle an end are candidates to be checked against
//! the values by the caller. Results are [`rowset::RowSet`]s: one bitmap per
//! block, combined block by block.
//!
//! There are no file formats and no Python here; callers hand in values and
//! index bytes.

pub mod binning;
pub mod block;
pub mod cluster;
pub mod column;
pub mod error;
pub mod eval;
pub mod interp;
pub mod key;
pub mod pieces;
pub mod portable;
pub mod rowset;
pub mod runs;
pub mod scan;

pub use error::CoreError;
