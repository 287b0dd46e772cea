import Foundation
import PushgateCore
import PushgateSQLite

/// A SQLite store on a fresh file in a fresh temporary folder, removed (with its WAL and SHM files) when
/// `body` returns or throws.
func withTemporaryStore<R>(
    configuration: SQLiteStore.Configuration = .init(),
    _ body: (SQLiteStore) async throws -> R
) async throws -> R {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-store-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    let store = try SQLiteStore(
        path: folder.appendingPathComponent("pushgate.sqlite").path,
        configuration: configuration
    )
    return try await body(store)
}
