//! A thread that runs one kind of blocking work for a worker's driver.
//!
//! The driver thread reads datagrams and sends acknowledgements for every
//! connection of its worker: anything that waits for a disk or a database
//! there is a pause for all of them. Such work goes to an [`Offload`]: a
//! named thread, started with its first job, that runs jobs in the order
//! given and hands each result back over a channel, ringing the driver's
//! waker so the result is read at once rather than on the next idle turn.
//! A [`Offload::batched`] thread takes every job waiting when it turns to
//! them (up to a bound) at once, so work that ends in a flush to disk can
//! share one flush among them.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::wake::Waker;

/// The work on a batch: one result per job, in their order.
type Run<J, R> = Box<dyn FnMut(Vec<J>) -> Vec<R> + Send>;

pub struct Offload<J, R> {
    name: &'static str,
    /// The work, until the thread takes it.
    run: Option<Run<J, R>>,
    waker: Option<Arc<Waker>>,
    /// Jobs taken at once, at most.
    batch: usize,
    jobs: Option<Sender<J>>,
    thread: Option<JoinHandle<()>>,
    done_tx: Sender<R>,
    done: Receiver<R>,
}

impl<J: Send + 'static, R: Send + 'static> Offload<J, R> {
    /// One job at a time.
    pub fn new(name: &'static str, mut run: impl FnMut(J) -> R + Send + 'static) -> Offload<J, R> {
        Offload::batched(name, 1, move |jobs: Vec<J>| {
            jobs.into_iter().map(&mut run).collect()
        })
    }

    /// Up to `batch` waiting jobs at a time; `run` returns one result per
    /// job, in order.
    pub fn batched(
        name: &'static str,
        batch: usize,
        run: impl FnMut(Vec<J>) -> Vec<R> + Send + 'static,
    ) -> Offload<J, R> {
        let (done_tx, done) = mpsc::channel();
        Offload {
            name,
            run: Some(Box::new(run)),
            waker: None,
            batch: batch.max(1),
            jobs: None,
            thread: None,
            done_tx,
            done,
        }
    }

    /// The driver's waker, rung as each job finishes. Without one, results
    /// are collected on the driver's next turn (at most 100 ms later).
    pub fn set_waker(&mut self, waker: Arc<Waker>) {
        self.waker = Some(waker);
    }

    /// Hands a job to the thread, started now if need be. The job comes
    /// back as `Err` when no thread can run it (none could be started, or
    /// it ended).
    pub fn submit(&mut self, job: J) -> Result<(), J> {
        if self.jobs.is_none() {
            let Some(mut run) = self.run.take() else {
                return Err(job);
            };
            let (tx, rx) = mpsc::channel::<J>();
            let (done, waker) = (self.done_tx.clone(), self.waker.clone());
            let most = self.batch;
            let spawned = std::thread::Builder::new()
                .name(self.name.into())
                .spawn(move || {
                    while let Ok(first) = rx.recv() {
                        let mut jobs = vec![first];
                        jobs.extend(rx.try_iter().take(most - 1));
                        for result in run(jobs) {
                            if done.send(result).is_err() {
                                return;
                            }
                        }
                        if let Some(w) = &waker {
                            w.wake();
                        }
                    }
                });
            match spawned {
                Ok(t) => {
                    self.thread = Some(t);
                    self.jobs = Some(tx);
                }
                Err(e) => {
                    eprintln!("convoy: cannot start the {} thread: {e}", self.name);
                    return Err(job);
                }
            }
        }
        let jobs = self.jobs.as_ref().expect("started above");
        jobs.send(job).map_err(|mpsc::SendError(job)| job)
    }

    /// Results of finished jobs, in the order they were submitted.
    pub fn finished(&self) -> impl Iterator<Item = R> + '_ {
        self.done.try_iter()
    }
}

impl<J, R> Drop for Offload<J, R> {
    /// Waits for the jobs handed over: a commit, once begun, is better
    /// finished than left half done (a crash would be safe too: nothing
    /// was acknowledged).
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_run_in_order_and_their_results_come_back() {
        let mut o = Offload::new("convoy-test", |n: u32| n * 2);
        for n in 0..100 {
            assert!(o.submit(n).is_ok());
        }
        let mut got = Vec::new();
        while got.len() < 100 {
            got.extend(o.finished());
            std::thread::yield_now();
        }
        assert_eq!(got, (0..100).map(|n| n * 2).collect::<Vec<_>>());
    }

    #[test]
    fn a_batched_thread_takes_what_waits_at_once_and_keeps_the_order() {
        let sizes = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = sizes.clone();
        let (gate_tx, gate) = mpsc::channel::<()>();
        let mut o = Offload::batched("convoy-test", 8, move |jobs: Vec<u32>| {
            // The first batch waits until all twenty jobs are queued.
            if seen.lock().unwrap().is_empty() {
                gate.recv().unwrap();
            }
            seen.lock().unwrap().push(jobs.len());
            jobs.into_iter().map(|n| n + 1).collect()
        });
        for n in 0..20 {
            o.submit(n).unwrap();
        }
        gate_tx.send(()).unwrap();
        let mut got = Vec::new();
        while got.len() < 20 {
            got.extend(o.finished());
            std::thread::yield_now();
        }
        assert_eq!(got, (1..21).collect::<Vec<_>>());
        let sizes = sizes.lock().unwrap().clone();
        assert_eq!(sizes.iter().sum::<usize>(), 20);
        assert!(sizes.iter().all(|&n| n <= 8), "{sizes:?}");
        assert!(sizes.len() <= 4, "what waited went in batches: {sizes:?}");
    }

    #[test]
    fn dropping_it_waits_for_the_jobs_handed_over() {
        let seen = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counter = seen.clone();
        let mut o = Offload::new("convoy-test", move |()| {
            std::thread::sleep(std::time::Duration::from_millis(5));
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        for _ in 0..5 {
            o.submit(()).unwrap();
        }
        drop(o);
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 5);
    }
}
