/// What this build is: `pushgate --version` prints it and `pushgate_build_info` carries it.
public enum BuildInfo {
    /// The release this source tree is (semantic versioning); raised with every release.
    public static let version = "0.10.0"
}
