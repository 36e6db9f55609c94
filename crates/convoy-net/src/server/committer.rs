//! The blocking end of each upload, off the protocol thread.
//!
//! Making an upload durable is an fsync of the file, a rename, an fsync of
//! its directory and the commit hook (the ingest's catalog write, itself
//! an fsync): 3–11 ms per upload on our VM, more on a busy disk. Done on
//! the driver thread, every one of them was a pause in reading datagrams
//! and sending acknowledgments for every connection of the worker, and a
//! drain after an outage commits a dozen uploads a second. So a session
//! whose upload is complete hands it to this worker thread and waits; the
//! result comes back over a channel and wakes the driver, and only then is
//! the client told "stored" (docs/NET.md, "Durability").
//!
//! One thread per server worker, started with its first job: jobs run in
//! the order given, so a connection's confirmations keep the order of its
//! uploads, and the disk sees one writer per worker, as before.

use std::path::Path;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use convoy_proto::{ConnectionHandle, StreamId};

use crate::auth::{CommitHook, Committed, Identity};
use crate::error::NetError;
use crate::store::{PartialUpload, Store};
use crate::wake::Waker;

/// Which session a job belongs to.
pub type JobKey = (ConnectionHandle, StreamId);

/// What a session asks to be made durable.
pub struct Job {
    /// The name inside the store, namespace included.
    pub stored: String,
    pub who: Option<Identity>,
    pub work: Work,
}

pub enum Work {
    /// A complete upload: fsync, check BLAKE3, rename, fsync the
    /// directory, then the hook.
    Commit(Box<PartialUpload>),
    /// Stored by an earlier run whose client never heard: the hook again
    /// (it is idempotent).
    Requeue { bytes: u64, blake3: [u8; 32] },
}

/// A job's outcome: the stored file's BLAKE3, or why it is not stored.
pub type Outcome = Result<[u8; 32], NetError>;

/// Runs a job: everything that must be on disk before "stored" is said.
pub fn run(job: Job, store: &Store, hook: Option<&dyn CommitHook>) -> Outcome {
    let (bytes, blake3) = match job.work {
        Work::Commit(upload) => (upload.size, upload.commit()?),
        Work::Requeue { bytes, blake3 } => (bytes, blake3),
    };
    if let Some(hook) = hook {
        queue(
            hook,
            job.who.as_ref(),
            &job.stored,
            &store.final_path(&job.stored),
            bytes,
            blake3,
        )?;
    }
    Ok(blake3)
}

fn queue(
    hook: &dyn CommitHook,
    who: Option<&Identity>,
    stored_name: &str,
    path: &Path,
    bytes: u64,
    blake3: [u8; 32],
) -> Result<(), NetError> {
    hook.committed(&Committed {
        who,
        stored_name,
        path,
        bytes,
        blake3,
    })
    .map_err(|e| NetError::Remote(format!("stored but not queued for indexing: {e}")))
}

/// A worker's commit thread and the channels to and from it.
pub struct Committer {
    store: Option<Store>,
    hook: Option<Arc<dyn CommitHook>>,
    waker: Option<Arc<Waker>>,
    jobs: Option<Sender<(JobKey, Job)>>,
    thread: Option<JoinHandle<()>>,
    done_tx: Sender<(JobKey, Outcome)>,
    done: Receiver<(JobKey, Outcome)>,
}

impl Committer {
    pub fn new(store: Option<Store>, hook: Option<Arc<dyn CommitHook>>) -> Committer {
        let (done_tx, done) = mpsc::channel();
        Committer {
            store,
            hook,
            waker: None,
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

    /// Hands a job to the thread (started now if need be). A server with
    /// no store gets no jobs: sessions refuse uploads before that.
    pub fn submit(&mut self, key: JobKey, job: Job) {
        let store = self.store.clone().expect("uploads need a store");
        let jobs = self.jobs.get_or_insert_with(|| {
            let (tx, rx) = mpsc::channel::<(JobKey, Job)>();
            let (hook, done, waker) = (self.hook.clone(), self.done_tx.clone(), self.waker.clone());
            let spawned = std::thread::Builder::new()
                .name("convoy-commit".into())
                .spawn(move || {
                    for (key, job) in rx {
                        let outcome = run(job, &store, hook.as_deref());
                        if done.send((key, outcome)).is_err() {
                            break;
                        }
                        if let Some(w) = &waker {
                            w.wake();
                        }
                    }
                });
            match spawned {
                Ok(t) => self.thread = Some(t),
                // No thread to be had: the job fails below (its channel
                // has no reader), and the client retries later.
                Err(e) => eprintln!("convoy: cannot start the commit thread: {e}"),
            }
            tx
        });
        if let Err(mpsc::SendError((key, _))) = jobs.send((key, job)) {
            let err = NetError::Socket(std::io::Error::other("the commit thread is gone"));
            let _ = self.done_tx.send((key, Err(err)));
        }
    }

    /// Results of finished jobs, in the order they were submitted.
    pub fn finished(&self) -> impl Iterator<Item = (JobKey, Outcome)> + '_ {
        self.done.try_iter()
    }
}

impl Drop for Committer {
    /// Waits for the jobs handed over: each is a complete upload whose
    /// commit, once begun, is better finished than left half done (a crash
    /// would be safe too: nothing was acknowledged).
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
