/* test_s3.c - s3:// MODELs (s3.c): the object URL of a prefix on AWS and
 * on a custom endpoint, the credential chain (environment, profile
 * files), the refusals, and S3's 403 reasons turned into messages that
 * name where the credentials came from and never them.  Expected URLs
 * follow AWS's documented forms (virtual-hosted and path-style). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "s3.h"
#include "tap.h"

static const char *const vars[] = {"AWS_ACCESS_KEY_ID",
                                   "AWS_SECRET_ACCESS_KEY",
                                   "AWS_SESSION_TOKEN",
                                   "AWS_PROFILE",
                                   "AWS_SHARED_CREDENTIALS_FILE",
                                   "AWS_CONFIG_FILE",
                                   "AWS_REGION",
                                   "AWS_DEFAULT_REGION",
                                   "AWS_ENDPOINT_URL",
                                   "AWS_ENDPOINT_URL_S3",
                                   "HOME"};

static void clean_env(void) {
  for (size_t i = 0; i < ARRAY_SIZE(vars); i++)
    unsetenv(vars[i]);
}

static void keys_env(void) {
  clean_env();
  setenv("AWS_ACCESS_KEY_ID", "AKIDUNIT", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "unit/secret+KEY", 1);
}

/* Parses s; on success the member URL of `name` and the shown forms. */
struct parsed {
  int rc;
  struct tpl__url u;
  struct tpl__http_signer signer;
  char *where;
  struct tpl__error err;
};

static void parse(const char *s, struct parsed *p) {
  memset(p, 0, sizeof(*p));
  p->rc = tpl__s3_parse(s, &p->u, &p->signer, &p->where, &p->err);
}

static void parsed_clear(struct parsed *p) {
  if (p->signer.free != NULL) p->signer.free(p->signer.ctx);
  tpl__url_clear(&p->u);
  free(p->where);
}

/* Whether parsing s fails with `code` and a message holding `want`. */
static int refused(const char *s, int code, const char *want) {
  struct parsed p;
  int ok;
  parse(s, &p);
  ok = p.rc == code && strstr(p.err.msg, want) != NULL;
  if (!ok)
    printf("# %s: expected %d '%s', found %d '%s'\n", s, code, want, p.rc,
           p.err.msg);
  parsed_clear(&p);
  return ok;
}

static int member_is(const struct tpl__url *u, const char *name,
                     const char *want) {
  char *m = tpl__url_member(u, name);
  int ok = m != NULL && strcmp(m, want) == 0;
  if (!ok) printf("# member %s: expected %s, found %s\n", name, want, m);
  free(m);
  return ok;
}

static int shown_is(const struct tpl__url *u, const char *name,
                    const char *want) {
  char *m = name ? tpl__url_member_shown(u, name) : tpl__url_dir_shown(u);
  int ok = m != NULL && strcmp(m, want) == 0;
  if (!ok) printf("# shown: expected %s, found %s\n", want, m);
  free(m);
  return ok;
}

static void test_virtual_hosted_on_aws(void) {
  struct parsed p;
  keys_env();
  setenv("AWS_DEFAULT_REGION", "eu-west-3", 1);
  parse("s3://my-bucket/models/llama 3", &p);
  REQUIRE(p.rc == 0);
  CHECK(p.u.name == NULL);
  CHECK(member_is(&p.u, "config.json",
                  "https://my-bucket.s3.eu-west-3.amazonaws.com/models/"
                  "llama%203/config.json"));
  CHECK(shown_is(&p.u, "config.json",
                 "s3://my-bucket/models/llama 3/"
                 "config.json"));
  CHECK(shown_is(&p.u, NULL, "s3://my-bucket/models/llama 3"));
  CHECK(strcmp(p.where, "region eu-west-3, endpoint AWS") == 0);
  parsed_clear(&p);
}

static void test_dotted_bucket_path_style(void) {
  struct parsed p;
  keys_env();
  parse("s3://my.bucket/m/", &p);
  REQUIRE(p.rc == 0);
  CHECK(member_is(&p.u, "x.json",
                  "https://s3.us-east-1.amazonaws.com/my.bucket/m/x.json"));
  parsed_clear(&p);
}

static void test_custom_endpoint_path_style(void) {
  struct parsed p;
  keys_env();
  setenv("AWS_ENDPOINT_URL", "http://other:1", 1);
  setenv("AWS_ENDPOINT_URL_S3", "http://minio:9000/base", 1);
  setenv("AWS_REGION", "us-west-2", 1);
  setenv("AWS_DEFAULT_REGION", "eu-west-3", 1);
  parse("s3://bkt/a/model.safetensors", &p);
  REQUIRE(p.rc == 0);
  CHECK(p.u.name != NULL && strcmp(p.u.name, "model.safetensors") == 0);
  CHECK(member_is(&p.u, p.u.name,
                  "http://minio:9000/base/bkt/a/model.safetensors"));
  CHECK(member_is(&p.u, "config.json",
                  "http://minio:9000/base/bkt/a/config.json"));
  CHECK(shown_is(&p.u, p.u.name, "s3://bkt/a/model.safetensors"));
  CHECK(strcmp(p.where, "region us-west-2, endpoint http://minio:9000/base") ==
        0);
  parsed_clear(&p);
  parse("s3://bkt", &p); /* the bucket's root */
  REQUIRE(p.rc == 0);
  CHECK(member_is(&p.u, "m.json", "http://minio:9000/base/bkt/m.json"));
  CHECK(shown_is(&p.u, NULL, "s3://bkt"));
  parsed_clear(&p);
}

static void test_refusals(void) {
  static const struct {
    const char *url, *want;
  } bad[] = {
      {"s3://ab/m/", "3 to 63"},
      {"s3://Bucket/m/", "lower-case"},
      {"s3://bu_ck/m/", "lower-case"},
      {"s3://bucket/m\x01/", "control"},
  };
  keys_env();
  for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
    CHECK(refused(bad[i].url, TPL_EUSAGE, bad[i].want));
  setenv("AWS_ENDPOINT_URL", "ftp://h", 1);
  CHECK(refused("s3://bucket/m/", TPL_EUSAGE, "AWS endpoint ftp://h"));
  setenv("AWS_ENDPOINT_URL", "http://h/", 1);
  setenv("AWS_REGION", "US East", 1);
  CHECK(refused("s3://bucket/m/", TPL_EUSAGE, "AWS region 'US East'"));
}

static void test_no_or_half_credentials(void) {
  clean_env();
  setenv("HOME", "/nonexistent-home", 1);
  CHECK(refused("s3://bucket/m/", TPL_EDENIED, "no AWS credentials"));
  setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
  CHECK(refused("s3://bucket/m/", TPL_EUSAGE, "found only AWS_ACCESS_KEY_ID"));
  clean_env();
  setenv("HOME", "/nonexistent-home", 1);
  setenv("AWS_PROFILE", "nosuch", 1);
  CHECK(refused("s3://bucket/m/", TPL_EUSAGE, "AWS_PROFILE=nosuch"));
}

static int write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f == NULL) return -1;
  fputs(text, f);
  return fclose(f);
}

/* The explain hook's message for S3's error body with `code`. */
static void explain(struct parsed *p, const char *code, char *out, size_t n) {
  struct tpl__error why = {0};
  char body[256];
  snprintf(body, sizeof(body),
           "<?xml version=\"1.0\"?><Error><Code>%s</Code></Error>", code);
  p->signer.explain(p->signer.ctx, "s3://b/k", 403, body, strlen(body), &why);
  snprintf(out, n, "%s", why.msg);
}

static void test_profile_files(void) {
  char dir[] = "/tmp/test_s3.XXXXXX", cred[64], conf[64];
  char msg[sizeof(((struct tpl__error *)0)->msg)];
  struct parsed p;
  REQUIRE(mkdtemp(dir) != NULL);
  snprintf(cred, sizeof(cred), "%s/credentials", dir);
  snprintf(conf, sizeof(conf), "%s/config", dir);
  REQUIRE(write_file(cred, "[default]\naws_access_key_id = AKIDDEF\n"
                           "aws_secret_access_key = def-secret\n"
                           "; a comment\n[work]\n"
                           "  aws_access_key_id=ASIAWORK  \n"
                           "aws_secret_access_key = work-secret\r\n"
                           "aws_session_token = work-token\n") == 0);
  REQUIRE(write_file(conf, "[work]\nregion = wrong-1\n"
                           "[profile work]\nregion = ap-south-2\n"
                           "endpoint_url = http://store:81\n") == 0);
  clean_env();
  setenv("AWS_SHARED_CREDENTIALS_FILE", cred, 1);
  setenv("AWS_CONFIG_FILE", conf, 1);
  setenv("AWS_PROFILE", "work", 1);
  parse("s3://bucket/m/", &p);
  REQUIRE(p.rc == 0);
  CHECK(strcmp(p.where, "region ap-south-2, endpoint http://store:81") == 0);
  CHECK(member_is(&p.u, "c.json", "http://store:81/bucket/m/c.json"));
  explain(&p, "SignatureDoesNotMatch", msg, sizeof(msg));
  CHECK_STR_CONTAINS(msg, "s3://b/k: HTTP 403 SignatureDoesNotMatch: ");
  CHECK_STR_CONTAINS(msg, "profile 'work' of ");
  CHECK(strstr(msg, "work-secret") == NULL && strstr(msg, "ASIAWORK") == NULL);
  explain(&p, "ExpiredToken", msg, sizeof(msg));
  CHECK_STR_CONTAINS(msg, "session token from profile 'work'");
  CHECK(strstr(msg, "work-token") == NULL);
  parsed_clear(&p);
  /* the environment's keys win over the profile's */
  setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "env-secret", 1);
  parse("s3://bucket/m/", &p);
  REQUIRE(p.rc == 0);
  explain(&p, "InvalidAccessKeyId", msg, sizeof(msg));
  CHECK_STR_CONTAINS(msg, "access key id from the environment");
  explain(&p, "RequestTimeTooSkewed", msg, sizeof(msg));
  CHECK_STR_CONTAINS(msg, "clock differs from the store's by more than 15");
  explain(&p, "AccessDenied", msg, sizeof(msg));
  CHECK_STR_CONTAINS(msg, "HTTP 403 AccessDenied: access denied to the "
                          "credentials from the environment");
  parsed_clear(&p);
  unlink(cred);
  unlink(conf);
  rmdir(dir);
}

static void test_sign_client_only_s3(void) {
  struct tpl__http_opts o = TPL_HTTP_OPTS_DEFAULT;
  struct tpl__http *h = NULL;
  struct tpl__error err = {0};
  clean_env();
  setenv("HOME", "/nonexistent-home", 1);
  REQUIRE(tpl__http_open(&o, &h, &err) == 0);
  CHECK(tpl__s3_sign_client(h, "http://h/m.safetensors", &err) == 0);
  CHECK_EQ_INT(tpl__s3_sign_client(h, "s3://bucket/m.safetensors", &err),
               TPL_EDENIED);
  keys_env();
  CHECK(tpl__s3_sign_client(h, "s3://bucket/m.safetensors", &err) == 0);
  tpl__http_close(h);
}

int main(void) {
  RUN(test_virtual_hosted_on_aws);
  RUN(test_dotted_bucket_path_style);
  RUN(test_custom_endpoint_path_style);
  RUN(test_refusals);
  RUN(test_no_or_half_credentials);
  RUN(test_profile_files);
  RUN(test_sign_client_only_s3);
  return tap_done();
}
