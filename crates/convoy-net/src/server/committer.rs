//! The blocking work of each request, off the protocol thread.
//!
//! Making an upload durable is an fsync of the file, a rename, an fsync of
//! its directory and the commit hook (the ingest's catalog write, itself
//! an fsync): 3–11 ms per upload on our VM, more on a busy disk. Done on
//! the driver thread, every one of them was a pause in reading datagrams
//! and sending acknowledgments for every connection of the worker, and a
//! drain after an outage commits a dozen uploads a second. So a session
//! whose upload is complete hands it to a commit thread and waits; the
//! result comes back over a channel and wakes the driver, and only then is
//! the client told "stored" (docs/NET.md, "Durability").
//!
//! Reading a whole file is the other blocking work a request can ask for:
//! the BLAKE3 of a stored file for a `get` (or to see whether a re-sent
//! upload is stored already), and of a partial file's bytes when an upload
//! resumes. A peer looping `get` over large files would otherwise stall
//! every connection of the worker. Those run on an open thread of their
//! own, so a long hash does not hold back other vehicles' commits either.
//!
//! Each worker has one thread of each kind, started with its first job:
//! jobs run in the order given, so a connection's confirmations keep the
//! order of its uploads, and the disk sees one writer per worker. The
//! commit thread takes every upload waiting for it at once
//! ([`run_all`]): a drain, or a thousand vehicles each sending a segment
//! a second, costs two flushes of the disk and one catalog transaction
//! per batch rather than three flushes per upload.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use convoy_proto::{ConnectionHandle, StreamId};

use crate::auth::{Authorizer, CommitHook, Committed, Identity, REFUSED_PREFIX};
use crate::error::NetError;
use crate::server::figures::ServerFigures;
use crate::server::offload::Offload;
use crate::store::{PartialUpload, PutStart, Store};
use crate::wake::Waker;

/// Which session a job belongs to.
pub type JobKey = (ConnectionHandle, StreamId);

/// What a session asks to be made durable.
pub struct Job {
    /// The name inside the store, namespace included.
    pub stored: String,
    pub who: Option<Identity>,
    /// The peer's static key: a commit asks the authorizer about it again,
    /// so a key revoked during the upload is never acknowledged.
    pub key: Option<[u8; 32]>,
    pub work: Work,
}

pub enum Work {
    /// A complete upload: fsync, check BLAKE3, rename, fsync the
    /// directory, then the hook.
    Commit(Box<PartialUpload>),
    /// Stored by an earlier run whose client never heard: the hook again
    /// (it is idempotent).
    Requeue { bytes: u64, blake3: [u8; 32] },
    /// What a request needs before its first reply, when that means
    /// reading a file (on the open thread).
    Open(Open),
}

/// A request to open, named by the job's `stored`.
pub enum Open {
    /// Start or resume an upload of `size` bytes with BLAKE3 `hash`.
    Put { size: u64, hash: [u8; 32] },
    /// Send a stored file.
    Get,
}

/// What an [`Open`] found.
pub enum Opened {
    Put(PutStart),
    /// The file at its start, its size and BLAKE3.
    Get {
        file: File,
        size: u64,
        hash: [u8; 32],
    },
}

/// A job's outcome.
pub enum Outcome {
    /// The stored file's BLAKE3, or why it is not stored.
    Stored(Result<[u8; 32], NetError>),
    Opened(Result<Opened, NetError>),
}

/// Runs a job: for a commit, everything that must be on disk before
/// "stored" is said.
pub fn run(
    job: Job,
    store: &Store,
    hook: Option<&dyn CommitHook>,
    auth: Option<&dyn Authorizer>,
    figures: Option<&ServerFigures>,
) -> Outcome {
    let started = std::time::Instant::now();
    let durable = match job.work {
        Work::Open(Open::Put { size, hash }) => {
            let owner = job.who.as_ref().map_or("", |w| w.name.as_str());
            return Outcome::Opened(
                store
                    .begin_put(owner, &job.stored, size, hash)
                    .map(Opened::Put),
            );
        }
        Work::Open(Open::Get) => {
            return Outcome::Opened(
                store
                    .open_get(&job.stored)
                    .map(|(file, size, hash)| Opened::Get { file, size, hash }),
            )
        }
        // A key revoked during the upload gets no acknowledgement; its
        // bytes stay in the partial file, never committed.
        Work::Commit(upload) => still_registered(auth, job.key.as_ref()).and_then(|()| {
            let size = upload.size;
            let t = std::time::Instant::now();
            let hash = upload.commit()?;
            if let Some(f) = figures {
                f.fsync.record(t.elapsed());
            }
            Ok((size, hash))
        }),
        Work::Requeue { bytes, blake3 } => Ok((bytes, blake3)),
    };
    let stored = durable.and_then(|(bytes, blake3)| {
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
    });
    if let (Some(f), Ok(_)) = (figures, &stored) {
        f.commit.record(started.elapsed());
    }
    Outcome::Stored(stored)
}

/// Uploads a commit thread makes durable together, at most.
pub const COMMIT_BATCH: usize = 32;

/// A commit thread's batch: the uploads are made durable together
/// ([`PartialUpload::commit_all`]: two flushes of the disk for all of
/// them) and queued together ([`CommitHook::committed_all`]: one catalog
/// transaction), each with the same checks as [`run`]. Outcomes in the
/// jobs' order.
pub fn run_all(
    jobs: Vec<Keyed<Job>>,
    store: &Store,
    hook: Option<&dyn CommitHook>,
    auth: Option<&dyn Authorizer>,
    figures: Option<&ServerFigures>,
) -> Vec<Keyed<Outcome>> {
    if jobs.len() == 1 {
        return jobs
            .into_iter()
            .map(|(key, job)| (key, run(job, store, hook, auth, figures)))
            .collect();
    }
    let started = std::time::Instant::now();
    let n = jobs.len();
    let mut keys = Vec::with_capacity(n);
    let mut names = Vec::with_capacity(n);
    // A request to open (not a commit thread's work, but answered all the
    // same), by job.
    let mut opened: Vec<Option<Outcome>> = (0..n).map(|_| None).collect();
    // Each job's (bytes, BLAKE3) once durable, or why not; an upload's is
    // filled in after the batch's flush.
    let mut durable: Vec<Result<(u64, [u8; 32]), NetError>> = Vec::with_capacity(n);
    let mut uploads = Vec::new();
    let mut upload_of = Vec::new();
    for (i, (key, job)) in jobs.into_iter().enumerate() {
        keys.push(key);
        let Job {
            stored,
            who,
            key: peer,
            work,
        } = job;
        durable.push(match work {
            // A key revoked during the upload gets no acknowledgement.
            Work::Commit(upload) => still_registered(auth, peer.as_ref()).map(|()| {
                let size = upload.size;
                upload_of.push((i, size));
                uploads.push(*upload);
                (size, [0; 32])
            }),
            Work::Requeue { bytes, blake3 } => Ok((bytes, blake3)),
            work @ Work::Open(_) => {
                let job = Job {
                    stored: stored.clone(),
                    who: who.clone(),
                    key: peer,
                    work,
                };
                opened[i] = Some(run(job, store, None, None, None));
                Ok((0, [0; 32]))
            }
        });
        names.push((stored, who));
    }
    let t = std::time::Instant::now();
    for ((i, size), r) in upload_of
        .into_iter()
        .zip(PartialUpload::commit_all(uploads))
    {
        durable[i] = r.map(|hash| (size, hash));
        if let Some(f) = figures {
            f.fsync.record(t.elapsed());
        }
    }
    let ready: Vec<usize> = (0..n)
        .filter(|&i| opened[i].is_none() && durable[i].is_ok())
        .collect();
    let paths: Vec<_> = ready
        .iter()
        .map(|&i| store.final_path(&names[i].0))
        .collect();
    let queued = match hook {
        Some(hook) if !ready.is_empty() => {
            let all: Vec<Committed<'_>> = ready
                .iter()
                .zip(&paths)
                .filter_map(|(&i, path)| {
                    let &(bytes, blake3) = durable[i].as_ref().ok()?;
                    Some(Committed {
                        who: names[i].1.as_ref(),
                        stored_name: &names[i].0,
                        path,
                        bytes,
                        blake3,
                    })
                })
                .collect();
            hook.committed_all(&all)
        }
        _ => vec![Ok(()); ready.len()],
    };
    for (&i, q) in ready.iter().zip(queued) {
        match q {
            Err(e) => {
                durable[i] = Err(NetError::Remote(format!(
                    "stored but not queued for indexing: {e}"
                )))
            }
            Ok(()) => {
                if let Some(f) = figures {
                    f.commit.record(started.elapsed());
                }
            }
        }
    }
    keys.into_iter()
        .zip(opened)
        .zip(durable)
        .map(|((key, opened), durable)| {
            let outcome = opened.unwrap_or_else(|| Outcome::Stored(durable.map(|(_, h)| h)));
            (key, outcome)
        })
        .collect()
}

fn still_registered(auth: Option<&dyn Authorizer>, key: Option<&[u8; 32]>) -> Result<(), NetError> {
    if let (Some(auth), Some(key)) = (auth, key) {
        auth.identify(key)
            .map_err(|why| NetError::Remote(format!("{REFUSED_PREFIX}{why}")))?;
    }
    Ok(())
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

type Keyed<T> = (JobKey, T);

/// A worker's commit and open threads.
pub struct Committer {
    commits: Offload<Keyed<Job>, Keyed<Outcome>>,
    opens: Offload<Keyed<Job>, Keyed<Outcome>>,
    /// Jobs no thread could take, failed here.
    refused: Vec<Keyed<Outcome>>,
    /// Jobs handed over whose outcome has not come back: a server that is
    /// shutting down waits for these (a commit, once begun, is answered).
    in_flight: usize,
}

impl Committer {
    /// Jobs are only handed over by sessions of a server with a store
    /// (sessions refuse uploads and downloads before that).
    pub fn new(
        store: Option<Store>,
        hook: Option<Arc<dyn CommitHook>>,
        auth: Option<Arc<dyn Authorizer>>,
        figures: Arc<ServerFigures>,
    ) -> Committer {
        let commit_store = store.clone();
        let commits = Offload::batched("convoy-commit", COMMIT_BATCH, move |jobs| {
            let store = commit_store.as_ref().expect("uploads need a store");
            let f = Some(&*figures);
            run_all(jobs, store, hook.as_deref(), auth.as_deref(), f)
        });
        let opens = Offload::new("convoy-open", move |(key, job): Keyed<Job>| {
            let store = store.as_ref().expect("requests need a store");
            (key, run(job, store, None, None, None))
        });
        Committer {
            commits,
            opens,
            refused: Vec::new(),
            in_flight: 0,
        }
    }

    /// The driver's waker, rung as each job finishes.
    pub fn set_waker(&mut self, waker: Arc<Waker>) {
        self.commits.set_waker(waker.clone());
        self.opens.set_waker(waker);
    }

    /// Hands a job to its thread. One that cannot be run fails, and the
    /// client retries later.
    pub fn submit(&mut self, key: JobKey, job: Job) {
        let opening = matches!(job.work, Work::Open(_));
        let offload = if opening {
            &mut self.opens
        } else {
            &mut self.commits
        };
        self.in_flight += 1;
        if offload.submit((key, job)).is_err() {
            let err = NetError::Socket(std::io::Error::other("no thread to run the request"));
            self.refused.push((
                key,
                if opening {
                    Outcome::Opened(Err(err))
                } else {
                    Outcome::Stored(Err(err))
                },
            ));
        }
    }

    /// Results of finished jobs; each thread's in the order submitted.
    /// Asked on every driver turn, so nothing is collected into a list.
    pub fn finished(&mut self) -> impl Iterator<Item = Keyed<Outcome>> + '_ {
        let in_flight = &mut self.in_flight;
        self.refused
            .drain(..)
            .chain(self.commits.finished())
            .chain(self.opens.finished())
            .inspect(move |_| *in_flight = in_flight.saturating_sub(1))
    }

    /// Jobs handed over and not yet back.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }
}
