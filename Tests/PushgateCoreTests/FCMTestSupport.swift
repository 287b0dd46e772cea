import Foundation
import PushgateCore

/// A throwaway 2048-bit RSA key made with `openssl genrsa` for these tests only, and service-account
/// files built around it.
enum FCMTestAccount {
    static let privateKeyPEM = """
        -----BEGIN PRIVATE KEY-----
        MIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQDwp6+pyX++1fuv
        EvEfgm/VcAdCUG2bZQFUO/hJC8DC5SD1cI4sX8LBm9o6ejvTJDsBy3mJGvDFP2Os
        OP5NpxkFXx+xlJIfSBGRJfhVqdDweXe5JLo00/K0MP5GPuX3Q38lAZRZ1OziTgyx
        F5xJ0XcX2B1QJqqw2HaUuiJTAQsvO5ddVabCKTYWk+lCDvIIiMmcGxWf6L0a2sAX
        NSRJi0gaIsTPpcwLTxoShavMSwVf2j9TDPfKR2uHC7Cu7LdJqetuT8gLXjTUCMbJ
        oNFP8Z4fZu+7VxB4cGhnOZJ8KAO+3x419szGOATTH7xCQpGEuj6Infz1SaPSOzt8
        qW8A3rSRAgMBAAECggEAF+j7MqX43Z2uTsnVn+UyZg0GRZwO1c2CZSt7qstChMKl
        5IjhMU6234xT8XMvUjYzcCVWnw0IjrpydVwoxQ+U9HQL5rV9kqLTDv4sJxuzDQ9u
        ehxIbWMBBk7nVpSdfdSMk4FNi2LUwdPSHj67qhhoChwQZoQe+ajaGEMJkcBk63Vh
        ij/ydUo8yIcdWD6nMGGgexRgC7Ua+dqvRlgKVRxdZNAqbcZ+U8G3LHc+S9u660Tr
        da8ZtP7s/UEjsajQm/wVCxYR6BxjYprNI/NoY9lxn5KQ1qJYDINv23v+PC4N/H6K
        0mbZQMNzyZSzooaIxnL3oqm/wOS4K7n0WQn3rDnFuQKBgQD9t9ZBbu3cvyXj45ke
        xtO5edGfyWQ9zsSxfx7xAAuHaMJpyTvIIeGpDpyI2v2EHH/yzfcDeHQ7XapzHcdU
        SCDUWzaVdHwqeZKLVzZ7XODe37BXk5lEMLo5WbtPYdzgnd/xwDIYjvSESb4pR7Ho
        qtyeEmsOFpw2K/K6Gpb004pAuQKBgQDy0cXNX/tsaz55N/NULUFrxV6kRYeXUNtR
        q7AhKplQDk/Mi/9gfuKIF2jgxSPl3Mn9tQ241L3LxsBGFPOzXZYBGGlUFFA6Y0Lh
        i9xSzc4zgo/3FJAXT2S/BT4mKNL0/WeurRvHCfBwxk0qaNCQwEgAkux3ujzYT4Dd
        2qk5tM82mQKBgQCMFOwexHhf4MmywP7Rl0VeqnuqlS7bUUYYGe+jcDrtUFHGxmxT
        WyGUjZSvmvlN785U6JLxP5gtDtIFLPPY/NnjZVkFu4KykNzwQf66rdUaOLbMI5oD
        pEOtVnWspoOlIIV8nHkMRiGKyIxNjmAT7gJQ5CpnZORqpGknh3bBReqXQQKBgBh5
        yKRw/ljpXny9hQuBHE0OsgGA+K/p+JF86t4M+zM0nhqSKgXCBHePVIUDmiC7Zqjq
        LR3qY888k3j896umzU4C9esBuSyJgN5XSLgYAqbyjCxtqDCRUihnEOKrzsffGypi
        TKB9gfz8IB8cPZm5qAhWxvsyjJuJOAYk2lX0wcZRAoGBAO2eOXG+MmuyvTvGfx7m
        5YlIcbv7dX2TV26ecbZZJ6Cu56Y412PtzmZq90C9c9OaUm2cUJFqVIoch3RHunq6
        07p4YsckSJbVGQKtnM2KpPp+PLtAwfs46VQ8Qg3tJ5t0xoqFiCKHz7v6wNTd9ShZ
        I7OfJvqTgoaFguRElFdUCsZw
        -----END PRIVATE KEY-----
        """

    static let tokenURI = "https://oauth2.example.test/token"

    /// The fields of a valid service-account file; tests remove or replace some.
    static func fields() -> [String: Any] {
        [
            "type": "service_account", "project_id": "pushgate-test", "private_key_id": "0123abcd",
            "private_key": privateKeyPEM, "client_email": "pushgate@pushgate-test.iam.gserviceaccount.com",
            "token_uri": tokenURI, "client_id": "1234567890",
        ]
    }

    static func json(_ fields: [String: Any] = fields()) -> [UInt8] {
        Array(try! JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]))
    }

    static func account() throws -> FCMServiceAccount { try FCMServiceAccount(jsonBytes: json()) }
}

func jsonObject(_ data: Data?) -> [String: Any]? {
    data.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
}
