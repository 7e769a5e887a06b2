//! A compiled set of `.proto` files ([`Schema`]): protox at run time, imports resolved as
//! ghz resolves them, errors as `file:line:col: message`.

use miette::Diagnostic;
use prost_reflect::{DescriptorPool, MethodDescriptor};
use protox::file::{File, FileResolver};
use std::path::{Path, PathBuf};

use super::ScenarioError;

/// Where imports of `files` are looked for, in order, as ghz looks (and lists them in its
/// JSON's `import-paths`): each file's own folder (unless it is `.`), then `.`, then the
/// `-i` folders given.
pub fn import_paths(files: &[PathBuf], given: &[PathBuf]) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut add = |path: &Path| {
        if !paths.iter().any(|known| known == path) {
            paths.push(path.to_path_buf());
        }
    };
    for file in files {
        if let Some(dir) = file
            .parent()
            .filter(|dir| !dir.as_os_str().is_empty() && *dir != Path::new("."))
        {
            add(dir);
        }
    }
    add(Path::new("."));
    for path in given {
        add(path);
    }
    paths
}

/// A compiled set of `.proto` files.
#[derive(Debug, Clone)]
pub struct Schema {
    pool: DescriptorPool,
}

impl Schema {
    /// Compiles `files` (paths to `.proto` files), resolving imports against
    /// [`import_paths`]`(files, includes)`, as ghz does.
    pub fn compile(files: &[PathBuf], includes: &[PathBuf]) -> Result<Schema, ScenarioError> {
        let includes = import_paths(files, includes);
        for file in files {
            if !file.is_file() {
                return Err(ScenarioError::Io {
                    path: file.clone(),
                    source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
                });
            }
        }
        let mut compiler =
            protox::Compiler::new(&includes).map_err(|err| proto_error(&err, |_| None))?;
        compiler
            .open_files(files)
            .map_err(|err| proto_error(&err, |name| read_included(&includes, name)))?;
        Ok(Schema {
            pool: compiler.descriptor_pool(),
        })
    }

    /// Compiles one `.proto` given as text, named `name` in error messages.
    pub fn compile_source(name: &str, source: &str) -> Result<Schema, ScenarioError> {
        let resolver = SingleFileResolver { name, source };
        let mut compiler = protox::Compiler::with_file_resolver(resolver.owned());
        compiler
            .open_file(name)
            .map_err(|err| proto_error(&err, |file| (file == name).then(|| source.to_owned())))?;
        Ok(Schema {
            pool: compiler.descriptor_pool(),
        })
    }

    /// A schema from an encoded `FileDescriptorSet`: a protoset file (`protoc
    /// --descriptor_set_out --include_imports`, ghz's `--protoset`) or what server reflection
    /// returned. `source` names it in error messages.
    pub fn from_descriptor_set(source: &str, bytes: &[u8]) -> Result<Schema, ScenarioError> {
        let pool = DescriptorPool::decode(bytes).map_err(|err| ScenarioError::Descriptors {
            origin: source.to_owned(),
            reason: err.to_string(),
        })?;
        Ok(Schema { pool })
    }

    /// The compiled descriptors (messages by name, for paths into a reply).
    pub fn pool(&self) -> &DescriptorPool {
        &self.pool
    }

    /// Every method of every service, as `package.Service.Method`.
    pub fn method_names(&self) -> Vec<String> {
        self.pool
            .services()
            .flat_map(|service| service.methods().collect::<Vec<_>>())
            .map(|method| method.full_name().to_owned())
            .collect()
    }

    /// Finds the method `call` names: `package.Service.Method` or `package.Service/Method` (ghz
    /// accepts both). With no call, the schema's only method.
    pub fn method(&self, call: Option<&str>) -> Result<MethodDescriptor, ScenarioError> {
        let available = || self.method_names().join(", ");
        let method = match call {
            None => {
                let mut methods = self
                    .pool
                    .services()
                    .flat_map(|s| s.methods().collect::<Vec<_>>());
                match (methods.next(), methods.next()) {
                    (Some(only), None) => only,
                    (None, _) => {
                        return Err(ScenarioError::UnknownCall {
                            call: String::new(),
                            available: "no services".to_owned(),
                        })
                    }
                    (Some(_), Some(_)) => {
                        return Err(ScenarioError::AmbiguousCall {
                            available: available(),
                        })
                    }
                }
            }
            Some(call) => {
                let normalized = call.trim_start_matches('/').replace('/', ".");
                let (service, method) =
                    normalized
                        .rsplit_once('.')
                        .ok_or_else(|| ScenarioError::UnknownCall {
                            call: call.to_owned(),
                            available: available(),
                        })?;
                self.pool
                    .get_service_by_name(service)
                    .and_then(|s| s.methods().find(|m| m.name() == method))
                    .ok_or_else(|| ScenarioError::UnknownCall {
                        call: call.to_owned(),
                        available: available(),
                    })?
            }
        };
        Ok(method)
    }
}

fn read_included(includes: &[PathBuf], name: &str) -> Option<String> {
    includes
        .iter()
        .find_map(|dir| std::fs::read_to_string(dir.join(name)).ok())
}

/// Turns a protox error into `file:line:col: message`, reading the file's text through `source`
/// to turn protox's byte offset into a line and column.
fn proto_error(err: &protox::Error, source: impl Fn(&str) -> Option<String>) -> ScenarioError {
    let file = err.file().unwrap_or("<proto>").to_owned();
    let offset = err
        .labels()
        .and_then(|mut labels| labels.next())
        .map(|label| label.offset());
    let location = match (offset, source(&file)) {
        (Some(offset), Some(text)) => {
            let before = &text[..offset.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before.len() - before.rfind('\n').map_or(0, |nl| nl + 1) + 1;
            format!("{file}:{line}:{col}")
        }
        _ => file,
    };
    ScenarioError::Proto {
        location,
        message: err.to_string(),
    }
}

/// Serves one in-memory `.proto` to protox (the built-in scenarios live in the binary).
struct SingleFileResolver<'a> {
    name: &'a str,
    source: &'a str,
}

impl SingleFileResolver<'_> {
    fn owned(&self) -> OwnedFileResolver {
        OwnedFileResolver {
            name: self.name.to_owned(),
            source: self.source.to_owned(),
        }
    }
}

struct OwnedFileResolver {
    name: String,
    source: String,
}

impl FileResolver for OwnedFileResolver {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        if name == self.name {
            File::from_source(name, &self.source)
        } else {
            // Well-known imports (google/protobuf/*) still resolve.
            protox::file::GoogleFileResolver::new().open_file(name)
        }
    }
}
