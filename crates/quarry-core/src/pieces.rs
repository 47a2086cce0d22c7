//! Work spread over rayon's threads only where there is more than one piece
//! of it. A parallel iterator started outside a pool's threads hands its work
//! to a worker and waits for it; a worker that slept since the last call
//! takes 25-80 us to wake on a virtual machine, several times what one small
//! block's answer costs (about 8 us to open a 2,000-row column, 6 us to
//! evaluate a range on it). One piece is therefore done where it is asked
//! for, and a caller that finds its call is one piece ([`one`]) need not
//! enter a pool at all.

use rayon::prelude::*;

/// Whether `n` pieces of work are at most one: done on the calling thread.
#[must_use]
pub fn one(n: usize) -> bool {
    n < 2
}

/// `f(i)` for each `i` in `0..n`, in order: on the calling thread when it is
/// [`one`] piece, else on the current pool's threads.
///
/// ```
/// assert_eq!(quarry_core::pieces::map(3, |i| i * 10), vec![0, 10, 20]);
/// assert_eq!(quarry_core::pieces::map(1, |i| i + 7), vec![7]);
/// ```
pub fn map<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync + Send) -> Vec<T> {
    if one(n) {
        (0..n).map(f).collect()
    } else {
        (0..n).into_par_iter().map(f).collect()
    }
}

/// `f(i, piece)` for each piece of `data` cut `len` at a time (the last may be
/// shorter), as [`map`] does.
///
/// ```
/// let mut data = [1, 2, 3, 4, 5];
/// quarry_core::pieces::for_each_mut(&mut data, 2, |i, piece| piece.iter_mut().for_each(|v| *v += 10 * i));
/// assert_eq!(data, [1, 2, 13, 14, 25]);
/// ```
pub fn for_each_mut<T: Send>(
    data: &mut [T],
    len: usize,
    f: impl Fn(usize, &mut [T]) + Sync + Send,
) {
    if one(data.len().div_ceil(len.max(1))) {
        data.chunks_mut(len.max(1))
            .enumerate()
            .for_each(|(i, piece)| f(i, piece));
    } else {
        data.par_chunks_mut(len.max(1))
            .enumerate()
            .for_each(|(i, piece)| f(i, piece));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_piece_stays_on_the_calling_thread() {
        let here = std::thread::current().id();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        // Outside the pool: map(1) runs here, and never enters the pool.
        assert_eq!(map(1, |_| std::thread::current().id()), vec![here]);
        let mut seen = vec![None; 1];
        for_each_mut(&mut seen, 4, |_, piece| {
            piece[0] = Some(std::thread::current().id());
        });
        assert_eq!(seen, vec![Some(here)]);
        // Several pieces inside a pool run on its threads.
        let workers: Vec<_> = pool.install(|| map(64, |_| std::thread::current().id()));
        assert!(workers.iter().all(|&id| id != here));
    }

    #[test]
    fn empty_work_is_empty() {
        assert!(map(0, |i| i).is_empty());
        let mut none: [u8; 0] = [];
        for_each_mut(&mut none, 8, |_, _| panic!("no piece"));
    }
}
