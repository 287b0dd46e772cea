import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One process per SQLite file: an exclusive `flock` on `PATH.lock`, held while the gateway runs. The
/// kernel drops it when the process dies, so a restart after a crash takes it at once, while a second
/// live process on the same file is refused at once. (A lock on the database file itself would not
/// do: closing any descriptor of it drops SQLite's own POSIX locks.)
final class DatabaseFileLock: Sendable {
    let path: String
    private let descriptor: Int32

    init(databasePath: String) throws(Gateway.StartupError) {
        path = databasePath + ".lock"
        descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw Gateway.StartupError(description: "-d: cannot open \(path): \(String(cString: strerror(errno)))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno == EWOULDBLOCK ? "another pushgate process uses it" : String(cString: strerror(errno))
            close(descriptor)
            throw Gateway.StartupError(
                description: "-d: \(databasePath): \(reason) (one SQLite file serves one process; "
                    + "share a database between instances with --store postgres://...)"
            )
        }
    }

    deinit { close(descriptor) }
}
