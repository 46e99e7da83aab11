#ifndef REDLOCK_TEST_SUPPORT_TEST_PKI_HPP
#define REDLOCK_TEST_SUPPORT_TEST_PKI_HPP

#include <filesystem>
#include <string>

namespace redlock::test {

// A small public-key infrastructure for TLS tests, made at test time with the openssl command line
// in a temporary directory of its own (removed by the destructor): a CA and certificates it signed,
// plus the broken ones a client must refuse. Every file is PEM. Keys are EC P-256, which is fast
// to make. Throws std::runtime_error with openssl's output when a step fails.
class test_pki {
 public:
  // A certificate and its private key.
  struct identity {
    std::filesystem::path cert;
    std::filesystem::path key;
  };

  test_pki();
  ~test_pki();
  test_pki(const test_pki&) = delete;
  test_pki& operator=(const test_pki&) = delete;

  const std::filesystem::path& dir() const noexcept { return dir_; }

  // The trusted CA's certificate (what a client passes as tls_options::ca_file).
  const std::filesystem::path& ca() const noexcept { return ca_.cert; }
  // A second CA that nobody trusts.
  const std::filesystem::path& other_ca() const noexcept { return other_ca_.cert; }

  // Signed by ca(), valid now, for DNS:localhost and IP:127.0.0.1.
  const identity& server() const noexcept { return server_; }
  // The same names, signed by other_ca().
  const identity& server_of_other_ca() const noexcept { return server_of_other_ca_; }
  // Signed by ca(), valid now, for DNS:elsewhere.example only.
  const identity& server_wrong_name() const noexcept { return server_wrong_name_; }
  // Signed by ca(), for localhost and 127.0.0.1, expired (valid in 2020 only).
  const identity& server_expired() const noexcept { return server_expired_; }
  // A client certificate signed by ca(), for servers with tls-auth-clients.
  const identity& client() const noexcept { return client_; }

 private:
  // Runs openssl with `arguments` (one shell word each, quoted here), in dir_.
  void openssl(const std::string& arguments) const;
  identity make_ca(const std::string& name, const std::string& subject);
  identity issue(const identity& issuer, const std::string& name, const std::string& subject,
                 const std::string& extensions, const std::string& validity);

  std::filesystem::path dir_;
  identity ca_;
  identity other_ca_;
  identity server_;
  identity server_of_other_ca_;
  identity server_wrong_name_;
  identity server_expired_;
  identity client_;
};

// One test_pki for the whole test process, made on first use and removed at exit.
const test_pki& shared_test_pki();

}  // namespace redlock::test

#endif
