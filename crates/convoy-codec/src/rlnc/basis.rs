//! The coefficient side of progressive Gauss–Jordan elimination.
//!
//! The basis is kept in reduced row echelon form at every arrival: the row
//! whose pivot is column j has a 1 at j and a 0 at every other pivot column.
//! Two things follow. Reducing a new vector needs no ordering: the multiplier
//! for pivot j is simply the vector's own entry at j. And the moment the rank
//! reaches g the rows *are* the identity, so the data is decoded without a
//! final back-substitution: the work is spread over the arrivals.
//!
//! Most rows are unit vectors: the code is systematic, and a source symbol
//! that arrives on its own is row e_i. A unit row has a zero in every other
//! column, so it never needs eliminating; the basis keeps the list of rows
//! that are not unit vectors (`dense`) and eliminates a new pivot's column
//! from those alone. A source symbol arriving with no coded symbols pending
//! then costs O(g) bytes of bookkeeping, not a pass over g rows (that
//! strided pass was 12 % of a 10 Gbit/s loopback receiver's CPU).
//!
//! Only coefficients live here (g bytes a row). The decoder mirrors every row
//! operation on payloads; the recoder only needs the rank test. Reducing the
//! coefficients first is what makes rejecting a non-innovative symbol cheap:
//! it costs O(rank·g) byte operations and touches no payload.

use crate::gf;

#[derive(Clone, Debug)]
pub(crate) struct Basis {
    g: usize,
    /// Row for pivot column j at `rows[j*g..(j+1)*g]`, meaningful when `has_pivot[j]`.
    rows: Vec<u8>,
    has_pivot: Vec<bool>,
    /// `unit[j]`: the row of pivot j is exactly e_j (meaningful with `has_pivot[j]`).
    unit: Vec<bool>,
    /// The pivots whose rows are not unit vectors: the only rows with
    /// non-zero entries outside their own pivot column.
    dense: Vec<usize>,
    rank: usize,
}

/// One step of a reduction: subtract `coeff` times the row of pivot `pivot`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Step {
    pub pivot: usize,
    pub coeff: u8,
}

impl Basis {
    pub fn new(g: usize) -> Self {
        Basis {
            g,
            rows: vec![0; g * g],
            has_pivot: vec![false; g],
            unit: vec![false; g],
            dense: Vec::with_capacity(g),
            rank: 0,
        }
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn is_full(&self) -> bool {
        self.rank == self.g
    }

    pub fn row(&self, pivot: usize) -> &[u8] {
        &self.rows[pivot * self.g..(pivot + 1) * self.g]
    }

    /// Whether the row of `pivot` is the unit vector, i.e. that source symbol
    /// is already known on its own.
    pub fn is_unit_row(&self, pivot: usize) -> bool {
        self.has_pivot[pivot] && self.unit[pivot]
    }

    /// Whether `pivot` is free and no row has a non-zero entry in its
    /// column: then the unit vector e_pivot goes in with no elimination at
    /// all ([`Basis::insert_unit`]).
    pub fn takes_unit_freely(&self, pivot: usize) -> bool {
        !self.has_pivot[pivot] && self.dense.iter().all(|&d| self.row(d)[pivot] == 0)
    }

    /// Adds e_pivot, for which [`Basis::takes_unit_freely`] holds.
    pub fn insert_unit(&mut self, pivot: usize) {
        debug_assert!(self.takes_unit_freely(pivot));
        let g = self.g;
        let row = &mut self.rows[pivot * g..(pivot + 1) * g];
        row.fill(0);
        row[pivot] = 1;
        self.has_pivot[pivot] = true;
        self.unit[pivot] = true;
        self.rank += 1;
    }

    /// Reduces `v` against the basis in place, appending the steps taken to
    /// `steps`. Returns the first non-zero column of what is left (the new
    /// pivot), or `None` when `v` lay in the span: a non-innovative symbol.
    pub fn reduce(&self, v: &mut [u8], steps: &mut Vec<Step>) -> Option<usize> {
        debug_assert_eq!(v.len(), self.g);
        for pivot in 0..self.g {
            let coeff = v[pivot];
            if coeff == 0 || !self.has_pivot[pivot] {
                continue;
            }
            // The row has zeros at every other pivot column, so this step
            // leaves the multipliers of the remaining steps untouched.
            gf::mul_add(v, self.row(pivot), coeff);
            steps.push(Step { pivot, coeff });
        }
        v.iter().position(|&c| c != 0)
    }

    /// Adds a reduced vector `v` whose first non-zero entry is at `pivot`.
    /// Scales it so the pivot is 1 and returns that scale; then clears column
    /// `pivot` from every other row, appending each `row -= coeff · v` to
    /// `eliminated` (as pivot of the row, coeff) so the caller can mirror it.
    pub fn insert(&mut self, pivot: usize, v: &mut [u8], eliminated: &mut Vec<Step>) -> u8 {
        let g = self.g;
        let scale = gf::inv(v[pivot]).expect("a pivot entry is non-zero");
        gf::mul_region(v, scale);
        // Unit rows have a zero in column `pivot` already; only dense rows
        // can need the step, and one may become a unit row by it.
        let mut k = 0;
        while k < self.dense.len() {
            let other = self.dense[k];
            let row = &mut self.rows[other * g..(other + 1) * g];
            let coeff = row[pivot];
            if coeff != 0 {
                gf::mul_add(row, v, coeff);
                eliminated.push(Step {
                    pivot: other,
                    coeff,
                });
                if is_unit(row, other) {
                    self.unit[other] = true;
                    self.dense.swap_remove(k);
                    continue;
                }
            }
            k += 1;
        }
        self.rows[pivot * g..(pivot + 1) * g].copy_from_slice(v);
        self.has_pivot[pivot] = true;
        self.unit[pivot] = is_unit(v, pivot);
        if !self.unit[pivot] {
            self.dense.push(pivot);
        }
        self.rank += 1;
        scale
    }
}

fn is_unit(row: &[u8], pivot: usize) -> bool {
    row.iter()
        .enumerate()
        .all(|(j, &c)| c == u8::from(j == pivot))
}
