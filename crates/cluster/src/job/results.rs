//! The run's results as ConfigMaps: how the pod hands its reports and
//! transcript to the runner outside through the API server alone.
//!
//! Each file is gzip'd and cut into pieces that fill ConfigMaps of at most
//! [`MAX_BYTES`] (the API server refuses objects over about 1 MiB). The
//! parts ([`part_name`]) are written first and the index ([`INDEX`]) last,
//! so an index that exists names parts that do.
use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::JOB_LABEL;

/// The index ConfigMap: the runner's exit status and the files.
pub const INDEX: &str = "dra-e2e-results";
/// The most a part holds, well under the API server's object limit.
pub const MAX_BYTES: usize = 900 * 1024;

/// The name of part `n` (from 1).
pub fn part_name(n: usize) -> String {
    format!("{INDEX}-{n}")
}

/// What the pod's runner left: its exit status and files by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Results {
    pub exit_status: i32,
    pub files: BTreeMap<String, Vec<u8>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    #[error("the results index {INDEX}: {0}")]
    Index(String),
    #[error("the results' file {file}: {reason}")]
    File { file: String, reason: String },
    #[error("compressing {file}: {source}")]
    Compress {
        file: String,
        #[source]
        source: std::io::Error,
    },
}

fn gzip(file: &str, bytes: &[u8]) -> Result<Vec<u8>, ResultsError> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes)
        .and_then(|()| enc.finish())
        .map_err(|source| ResultsError::Compress {
            file: file.to_owned(),
            source,
        })
}

fn config_map(name: String, namespace: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([(
                JOB_LABEL.to_owned(),
                namespace.to_owned(),
            )])),
            ..Default::default()
        },
        ..Default::default()
    }
}

impl Results {
    /// The parts, in order, and the index (to be created last).
    pub fn to_config_maps(
        &self,
        namespace: &str,
    ) -> Result<(Vec<ConfigMap>, ConfigMap), ResultsError> {
        let mut parts: Vec<BTreeMap<String, ByteString>> = Vec::new();
        let mut sizes: Vec<usize> = Vec::new();
        let mut listed = Vec::new();
        for (name, bytes) in &self.files {
            let packed = gzip(name, bytes)?;
            let pieces: Vec<&[u8]> = if packed.is_empty() {
                vec![&[][..]]
            } else {
                packed.chunks(MAX_BYTES).collect()
            };
            listed.push(format!("{name} {}", pieces.len()));
            for (i, piece) in pieces.into_iter().enumerate() {
                // The first part with room for it, else a new one.
                let at = match sizes.iter().position(|s| s + piece.len() <= MAX_BYTES) {
                    Some(at) => at,
                    None => {
                        parts.push(BTreeMap::new());
                        sizes.push(0);
                        parts.len() - 1
                    }
                };
                sizes[at] += piece.len();
                parts[at].insert(format!("{name}.gz.{i:04}"), ByteString(piece.to_vec()));
            }
        }
        let parts = parts
            .into_iter()
            .enumerate()
            .map(|(i, data)| {
                let mut cm = config_map(part_name(i + 1), namespace);
                cm.binary_data = Some(data);
                cm
            })
            .collect::<Vec<_>>();
        let mut index = config_map(INDEX.to_owned(), namespace);
        index.data = Some(BTreeMap::from([
            ("exit-status".to_owned(), self.exit_status.to_string()),
            ("parts".to_owned(), parts.len().to_string()),
            ("files".to_owned(), listed.join("\n")),
        ]));
        Ok((parts, index))
    }

    /// How many parts `index` says there are.
    pub fn parts_of(index: &ConfigMap) -> Result<usize, ResultsError> {
        let data = index.data.as_ref();
        data.and_then(|d| d.get("parts"))
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| ResultsError::Index("no number of parts".into()))
    }

    /// Reads the results back from the index and its parts.
    pub fn from_config_maps(
        index: &ConfigMap,
        parts: &[ConfigMap],
    ) -> Result<Results, ResultsError> {
        let data = index
            .data
            .as_ref()
            .ok_or_else(|| ResultsError::Index("no data".into()))?;
        let exit_status = data
            .get("exit-status")
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| ResultsError::Index("no exit status".into()))?;
        let mut pieces: BTreeMap<&str, &ByteString> = BTreeMap::new();
        for part in parts {
            for (k, v) in part.binary_data.iter().flatten() {
                pieces.insert(k, v);
            }
        }
        let mut files = BTreeMap::new();
        for line in data.get("files").map(String::as_str).unwrap_or("").lines() {
            let bad = |reason: String| ResultsError::File {
                file: line.to_owned(),
                reason,
            };
            let (name, count) = line
                .rsplit_once(' ')
                .and_then(|(n, c)| Some((n, c.parse::<usize>().ok()?)))
                .ok_or_else(|| bad("not `NAME PIECES`".into()))?;
            let mut packed = Vec::new();
            for i in 0..count {
                let key = format!("{name}.gz.{i:04}");
                let piece = pieces
                    .get(key.as_str())
                    .ok_or_else(|| bad(format!("piece {key} is missing")))?;
                packed.extend_from_slice(&piece.0);
            }
            let mut bytes = Vec::new();
            flate2::read::GzDecoder::new(&packed[..])
                .read_to_end(&mut bytes)
                .map_err(|e| bad(format!("not gzip: {e}")))?;
            files.insert(name.to_owned(), bytes);
        }
        Ok(Results { exit_status, files })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes gzip cannot shrink, so that they need several parts.
    fn noise(len: usize, mut seed: u64) -> Vec<u8> {
        (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect()
    }

    #[test]
    fn results_over_several_config_maps_read_back_whole() {
        let results = Results {
            exit_status: 1,
            files: BTreeMap::from([
                ("junit.xml".to_owned(), b"<testsuites/>".to_vec()),
                ("run.log".to_owned(), noise(2 * MAX_BYTES + 10, 7)),
                ("empty".to_owned(), Vec::new()),
            ]),
        };
        let (parts, index) = results.to_config_maps("ns").unwrap();
        assert_eq!(parts.len(), 3, "two full parts and the rest");
        for p in &parts {
            let size: usize = p.binary_data.iter().flatten().map(|(_, v)| v.0.len()).sum();
            assert!(size <= MAX_BYTES, "{size}");
            assert_eq!(p.metadata.namespace.as_deref(), Some("ns"));
        }
        assert_eq!(Results::parts_of(&index).unwrap(), 3);
        assert_eq!(Results::from_config_maps(&index, &parts).unwrap(), results);
    }

    #[test]
    fn a_missing_part_is_named() {
        let results = Results {
            exit_status: 0,
            files: BTreeMap::from([("run.log".to_owned(), noise(MAX_BYTES + 1, 3))]),
        };
        let (parts, index) = results.to_config_maps("ns").unwrap();
        let e = Results::from_config_maps(&index, &parts[..1]).unwrap_err();
        assert!(e.to_string().contains("run.log.gz.0001 is missing"), "{e}");
        let e = Results::from_config_maps(&ConfigMap::default(), &parts).unwrap_err();
        assert!(e.to_string().contains("no data"), "{e}");
    }
}
