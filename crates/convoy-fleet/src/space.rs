//! Where nodes are: a uniform grid of cells rebuilt at every mobility step,
//! queried for the nodes that might hear a transmitter.

use convoy_ave::Vec2;

pub struct SpatialGrid {
    cell: f64,
    origin: Vec2,
    cols: usize,
    rows: usize,
    cells: Vec<Vec<u32>>,
}

impl SpatialGrid {
    pub fn new(lo: Vec2, hi: Vec2, cell: f64) -> SpatialGrid {
        let pad = cell;
        let origin = Vec2::new(lo.x - pad, lo.y - pad);
        let cols = (((hi.x - lo.x) + 2.0 * pad) / cell).ceil().max(1.0) as usize;
        let rows = (((hi.y - lo.y) + 2.0 * pad) / cell).ceil().max(1.0) as usize;
        SpatialGrid {
            cell,
            origin,
            cols,
            rows,
            cells: vec![Vec::new(); cols * rows],
        }
    }

    fn cell_of(&self, p: Vec2) -> (usize, usize) {
        let c = ((p.x - self.origin.x) / self.cell)
            .floor()
            .clamp(0.0, (self.cols - 1) as f64) as usize;
        let r = ((p.y - self.origin.y) / self.cell)
            .floor()
            .clamp(0.0, (self.rows - 1) as f64) as usize;
        (c, r)
    }

    pub fn clear(&mut self) {
        self.cells.iter_mut().for_each(Vec::clear);
    }

    pub fn insert(&mut self, id: u32, p: Vec2) {
        let (c, r) = self.cell_of(p);
        self.cells[r * self.cols + c].push(id);
    }

    /// Every node in the cells within `radius` of `p` (a superset of those
    /// within the radius), in cell order then insertion order.
    pub fn near(&self, p: Vec2, radius: f64, out: &mut Vec<u32>) {
        out.clear();
        let (c0, r0) = self.cell_of(Vec2::new(p.x - radius, p.y - radius));
        let (c1, r1) = self.cell_of(Vec2::new(p.x + radius, p.y + radius));
        for r in r0..=r1 {
            for c in c0..=c1 {
                out.extend_from_slice(&self.cells[r * self.cols + c]);
            }
        }
    }
}
