import Foundation
import Logging

/// A logger for tests: silent unless `PUSHGATE_TEST_LOG` names a level (`debug`, `trace`...), then
/// it writes to stderr. Lets a hanging test be diagnosed without changing code.
enum TestLogger {
    static func make(_ label: String) -> Logger {
        guard let raw = ProcessInfo.processInfo.environment["PUSHGATE_TEST_LOG"],
            let level = Logger.Level(rawValue: raw)
        else {
            return Logger(label: label, factory: { _ in SwiftLogNoOpLogHandler() })
        }
        var logger = Logger(label: label, factory: { StreamLogHandler.standardError(label: $0) })
        logger.logLevel = level
        return logger
    }
}
