import Foundation
import PushgateCore

/// A tmpfs of `megabytes` mounted on a fresh folder for `body`, unmounted and removed afterwards. False
/// (and `body` not run) when this process may not mount (not root): the caller says it skipped.
func withSmallVolume(megabytes: Int, _ body: (SmallVolume) async throws -> Void) async throws -> Bool {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-volume-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    guard SmallVolume.run(["mount", "-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", folder.path]) else {
        return false
    }
    defer { _ = SmallVolume.run(["umount", folder.path]) }
    try await body(SmallVolume(folder: folder.path, megabytes: megabytes))
    return true
}

/// A small volume of its own (a tmpfs) for the disk-space tests.
struct SmallVolume: Sendable {
    let folder: String
    let megabytes: Int

    func path(_ name: String) -> String { folder + "/" + name }

    /// The file's size in bytes (0 when it does not exist).
    func size(_ name: String) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: path(name)))?[.size] as? NSNumber)?.int64Value ?? 0
    }

    /// Free bytes on the volume (statvfs).
    var freeBytes: Int64 {
        var info = statvfs()
        guard statvfs(folder, &info) == 0 else { return -1 }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    /// Fills the volume with a file `name` until at most `leaving` bytes stay free.
    func fill(_ name: String, leaving: Int64) throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: createEmpty(name)))
        defer { try? handle.close() }
        let block = Data(count: 64 * 1024)
        while freeBytes > leaving {
            let chunk = min(Int64(block.count), freeBytes - leaving)
            do { try handle.write(contentsOf: block.prefix(Int(max(chunk, 4096)))) } catch { break }
        }
    }

    private func createEmpty(_ name: String) -> String {
        _ = FileManager.default.createFile(atPath: path(name), contents: nil)
        return path(name)
    }

    /// Changes the volume's size (tmpfs remount).
    func resize(megabytes: Int) -> Bool {
        Self.run(["mount", "-o", "remount,size=\(megabytes)m", folder])
    }

    static func run(_ arguments: [String]) -> Bool {
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
            process.waitUntilExit()
            return process.terminationStatus == 0
        } catch {
            return false
        }
    }
}
