//! Opening a workload: the reader for a trace format (sniffed or named) or a generator, with
//! the `ops` filter and `limit` around it.

use std::io::{BufReader, Read};
use std::path::Path;

use super::*;
use crate::error::{Error, Result};

/// Open the workload: the reader or generator, with the `ops` filter and `limit` applied.
pub fn open(spec: &WorkloadSpec) -> Result<Box<dyn RequestSource>> {
    let keep = Keep::of(spec);
    match &spec.source {
        SourceSpec::Overlay(parts) => {
            let parts = parts
                .iter()
                .map(|p| open_source(p, spec.device, Keep::ALL))
                .collect::<Result<Vec<_>>>()?;
            Ok(keep.apply(overlay::Overlay::new(parts)?))
        }
        one => open_source(one, spec.device, keep),
    }
}

/// Open one trace or generator (an overlay's parts are opened one by one).
fn open_source(
    source: &SourceSpec,
    device: Option<u64>,
    keep: Keep,
) -> Result<Box<dyn RequestSource>> {
    match source {
        SourceSpec::Trace { path, format } => open_trace(path, *format, device, keep),
        SourceSpec::Synthetic(synth) => {
            if device.is_some() {
                return Err(Error::config(
                    "workload.device",
                    "a synthetic workload has no devices to select from",
                ));
            }
            synth::open(synth, keep)
        }
        SourceSpec::Overlay(_) => Err(Error::config(
            "workload.overlay",
            "an overlay part cannot itself be an overlay",
        )),
        SourceSpec::Files(_) => Err(Error::config(
            "workload.files",
            "a file-level workload is replayed through a host file system: add a [host] table",
        )),
    }
}

/// Open the trace at `path` (decompressing transparently, sniffing when `format` is
/// [`Format::Auto`]). No `ops` filter or limit.
pub fn open_trace_file(
    path: &Path,
    format: Format,
    device: Option<u64>,
) -> Result<Box<dyn RequestSource>> {
    open_trace(path, format, device, Keep::ALL)
}

/// The format of the trace at `path`: sniffed from its first [`sniff::SNIFF_BYTES`]
/// decompressed bytes and its name.
pub fn sniff_path(path: &Path) -> Result<Format> {
    let label = path.display().to_string();
    let mut head = Vec::with_capacity(sniff::SNIFF_BYTES);
    decompress::open_path(path)?
        .take(sniff::SNIFF_BYTES as u64 + 1)
        .read_to_end(&mut head)
        .map_err(|e| Error::io(&label, &e))?;
    let complete = head.len() <= sniff::SNIFF_BYTES;
    head.truncate(sniff::SNIFF_BYTES);
    let name = decompress::Compression::strip_extension(&label);
    sniff::sniff(name, &head, complete).map_err(|e| match e {
        Error::Format { msg, .. } => Error::Format { file: label, msg },
        other => other,
    })
}

/// A reader over in-memory, uncompressed trace bytes (tests, fuzzing, embedding). `label`
/// names the data in errors and is the file name for sniffing.
pub fn from_bytes<'a>(
    format: Format,
    label: &str,
    bytes: &'a [u8],
    device: Option<u64>,
) -> Result<Box<dyn RequestSource + 'a>> {
    let format = match format {
        Format::Auto => sniff::sniff(
            label,
            bytes.get(..sniff::SNIFF_BYTES).unwrap_or(bytes),
            bytes.len() <= sniff::SNIFF_BYTES,
        )?,
        f => f,
    };
    build(format, label, device, || Ok(bytes), Keep::ALL)
}

fn open_trace(
    path: &Path,
    format: Format,
    device: Option<u64>,
    keep: Keep,
) -> Result<Box<dyn RequestSource>> {
    let format = match format {
        Format::Auto => sniff_path(path)?,
        f => f,
    };
    let label = path.display().to_string();
    build(format, &label, device, || decompress::open_path(path), keep)
}

/// The reader for `format`, whose input `reopen` yields (twice for multi-device text
/// formats: once for the layout pre-pass, once to read).
fn build<'a, R: Read + Send + 'a>(
    format: Format,
    label: &str,
    device: Option<u64>,
    mut reopen: impl FnMut() -> Result<R>,
    keep: Keep,
) -> Result<Box<dyn RequestSource + 'a>> {
    let no_devices = |device: Option<u64>| match device {
        None => Ok(()),
        Some(_) => Err(Error::config(
            "workload.device",
            format!(
                "trace format `{}` has no device numbers to select from",
                format.name()
            ),
        )),
    };
    match format {
        Format::Spc => text_source(spc::Spc, label, device, reopen, keep),
        Format::Msr => text_source(msr::Msr, label, device, reopen, keep),
        Format::CloudPhysicsCsv => {
            text_source(cloudphysics::CloudPhysics, label, device, reopen, keep)
        }
        Format::MqSim => text_source(mqsim::MqSim, label, device, reopen, keep),
        Format::DiskSim => text_source(disksim::DiskSim, label, device, reopen, keep),
        Format::Systor => text_source(systor::Systor, label, device, reopen, keep),
        Format::TencentCbs => text_source(tencent::TencentCbs, label, device, reopen, keep),
        Format::Blkparse => text_source(blkparse::Blkparse::queue(), label, device, reopen, keep),
        Format::BlkparseDispatch => {
            text_source(blkparse::Blkparse::dispatch(), label, device, reopen, keep)
        }
        Format::OracleGeneral => {
            no_devices(device)?;
            Ok(keep.apply(oracle::OracleReader::new(reopen()?, label)))
        }
        Format::Csv(spec) => {
            no_devices(device)?;
            text_source(spec, label, None, reopen, keep)
        }
        Format::Vscsi => {
            no_devices(device)?;
            Ok(keep.apply(vscsi::VscsiReader::new(reopen()?, label)?))
        }
        Format::KeysU32Be => {
            no_devices(device)?;
            Ok(keep.apply(keys::KeysReader::new(reopen()?, keys::Endian::Big, label)))
        }
        Format::KeysU32Le => {
            no_devices(device)?;
            Ok(keep.apply(keys::KeysReader::new(
                reopen()?,
                keys::Endian::Little,
                label,
            )))
        }
        Format::Auto => Err(Error::Format {
            file: label.to_string(),
            msg: "format `auto` must be resolved by sniffing before a reader is built".to_string(),
        }),
    }
}

fn text_source<'a, R: Read + Send + 'a, F: text::LineFormat + 'a>(
    fmt: F,
    label: &str,
    device: Option<u64>,
    mut reopen: impl FnMut() -> Result<R>,
    keep: Keep,
) -> Result<Box<dyn RequestSource + 'a>> {
    let buffered = |r: R| BufReader::with_capacity(decompress::BUF_BYTES, r);
    let layout = text::layout_for::<F>(device, || {
        text::scan_layout(buffered(reopen()?), &fmt, label)
    })?;
    let reader = TextReader::new(buffered(reopen()?), fmt, label, layout);
    Ok(keep.apply(reader))
}

/// The `ops` filter and `limit`, applied around a source.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Keep {
    reads_only: bool,
    limit: Option<u64>,
}

impl Keep {
    pub(crate) const ALL: Keep = Keep {
        reads_only: false,
        limit: None,
    };

    fn of(spec: &WorkloadSpec) -> Keep {
        Keep {
            reads_only: spec.ops == OpsFilter::Reads,
            limit: spec.limit,
        }
    }

    /// Box `source`, wrapped only when something is filtered, so the plain case costs one
    /// virtual call per request.
    pub(crate) fn apply<'a, S: RequestSource + 'a>(self, source: S) -> Box<dyn RequestSource + 'a> {
        if !self.reads_only && self.limit.is_none() {
            return Box::new(source);
        }
        Box::new(Kept {
            inner: source,
            reads_only: self.reads_only,
            left: self.limit.unwrap_or(u64::MAX),
        })
    }
}

struct Kept<S> {
    inner: S,
    reads_only: bool,
    /// Requests still to hand out (after filtering).
    left: u64,
}

impl<S: RequestSource> RequestSource for Kept<S> {
    #[inline]
    fn next_request(&mut self) -> Result<Option<Request>> {
        if self.left == 0 {
            return Ok(None);
        }
        while let Some(req) = self.inner.next_request()? {
            if self.reads_only && req.op == Op::Write {
                continue;
            }
            self.left -= 1;
            return Ok(Some(req));
        }
        self.left = 0;
        Ok(None)
    }

    fn addressing(&self) -> Addressing {
        self.inner.addressing()
    }

    fn label(&self) -> &str {
        self.inner.label()
    }

    fn set_load(&mut self, iops: f64) -> Result<()> {
        self.inner.set_load(iops)
    }

    fn device_bases(&self) -> Option<&[(u64, u64)]> {
        self.inner.device_bases()
    }
}
