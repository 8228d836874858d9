/* Logging by level and subsystem. STRATA_LOG="level[:sub,sub...]". */
#include "base/base.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* -1 until strata_log_init() ran; then written once under the pthread_once. Readers
 * race benignly with the single initialising write of an int (same value from then). */
int strata_log_level_ = -1;
uint32_t strata_log_mask_ = STRATA_SUB_ALL;

static pthread_once_t once = PTHREAD_ONCE_INIT;

static const struct { const char *name; int level; } levels[] = {
	{ "off", STRATA_LOG_OFF },     { "error", STRATA_LOG_ERROR },
	{ "warn", STRATA_LOG_WARN },   { "info", STRATA_LOG_INFO },
	{ "debug", STRATA_LOG_DEBUG }, { "trace", STRATA_LOG_TRACE },
};
static const struct { const char *name; uint32_t bit; } subs[] = {
	{ "base", STRATA_SUB_BASE },         { "kernels", STRATA_SUB_KERNELS },
	{ "tiers", STRATA_SUB_TIERS },       { "prefetch", STRATA_SUB_PREFETCH },
	{ "cachemgr", STRATA_SUB_CACHEMGR }, { "engine", STRATA_SUB_ENGINE },
};

static void parse_env(void)
{
	int level = STRATA_LOG_WARN;
	uint32_t mask = STRATA_SUB_ALL;
	const char *env = getenv("STRATA_LOG");
	if (env && *env) {
		char buf[256];
		snprintf(buf, sizeof buf, "%s", env);
		char *colon = strchr(buf, ':');
		if (colon)
			*colon = 0;
		for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
			if (!strcasecmp(buf, levels[i].name))
				level = levels[i].level;
		if (colon) {
			mask = 0;
			char *save = NULL;
			for (char *t = strtok_r(colon + 1, ",", &save); t; t = strtok_r(NULL, ",", &save))
				for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
					if (!strcasecmp(t, subs[i].name))
						mask |= subs[i].bit;
		}
	}
	strata_log_mask_ = mask;
	strata_log_level_ = level;
}

void strata_log_init(void)
{
	pthread_once(&once, parse_env);
}

void strata_log_set(strata_log_level level, uint32_t sub_mask)
{
	strata_log_init();
	strata_log_mask_ = sub_mask;
	strata_log_level_ = level;
}

static const char *sub_name(strata_log_sub sub)
{
	for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
		if (subs[i].bit == (uint32_t)sub)
			return subs[i].name;
	return "?";
}

void strata_log_write(strata_log_level level, strata_log_sub sub, const char *file,
		      int line, const char *fmt, ...)
{
	static const char *tag[] = { "", "ERROR", "WARN", "INFO", "DEBUG", "TRACE" };
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	/* One fprintf per message so lines from threads do not interleave. */
	if (level <= STRATA_LOG_WARN)
		fprintf(stderr, "strata %s %s: %s (%s:%d)\n", tag[level], sub_name(sub), msg,
			base, line);
	else
		fprintf(stderr, "strata %s %s: %s\n", tag[level], sub_name(sub), msg);
}

uint64_t strata_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
