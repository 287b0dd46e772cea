import PushgateCore

/// The commit this binary was built from. `scripts/release.sh` writes it into
/// `BuildCommit.generated.swift` (ignored by git, removed after the build) and builds with
/// `-DPUSHGATE_BUILD_COMMIT`; every other build (`swift build`, `swift test`) has no commit to
/// tell and says "unknown" rather than failing.
enum BuildCommit {
    #if PUSHGATE_BUILD_COMMIT
    static let hash = generatedBuildCommit
    #else
    static let hash = "unknown"
    #endif

    /// What `pushgate --version` prints: `pushgate 0.10.0 (commit 1a2b3c4d5e6f)`.
    static var versionLine: String { "pushgate \(BuildInfo.version) (commit \(hash))" }
}
