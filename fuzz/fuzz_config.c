/*
 * fuzz_config - libFuzzer target: the config parser.
 *
 * The input is a config file, given to cfg_load through a memfd (the
 * parser reads a path).  Any input must give 0 or a FILE:LINE error,
 * never a crash; -o KEY=VALUE (cfg_set_mount, and cfg_set_job for the
 * default jobs: KEY or JOB.KEY) gets the first line split at '='; and the
 * input is read as a class list (classes = FILE, cfg_classes_parse),
 * which must give names or a FILE:LINE error.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	struct cfg *c = NULL;
	char err[1024], *line, *eq, *nl;
	int r;

	if (fd < 0) {
		if ((fd = memfd_create("fuzz.conf", 0)) < 0)
			abort();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	err[0] = '\0';
	r = cfg_load(path, &c, err, sizeof(err));
	if (r == 0) {
		if (c == NULL)
			abort();
		cfg_free(c);
	} else if (err[0] == '\0') {
		abort(); /* an error must say why */
	}
	/* the input as a class list */
	{
		char **names = NULL;
		size_t n = 0;

		err[0] = '\0';
		if (cfg_classes_parse((const char *)data, size, "fuzz.classes",
			&names, &n, err, sizeof(err)) == 0) {
			if (n == 0 || names == NULL)
				abort();
			cfg_classes_free(names, n);
		} else if (strncmp(err, "fuzz.classes", 12) != 0) {
			abort(); /* an error must say where */
		}
	}
	/* -o KEY=VALUE on a default config */
	if ((line = malloc(size + 1)) == NULL)
		return 0;
	memcpy(line, data, size);
	line[size] = '\0';
	if ((nl = strchr(line, '\n')) != NULL)
		*nl = '\0';
	if ((eq = strchr(line, '=')) != NULL &&
	    cfg_default_trees("/nonexistent/train", "/nonexistent/val", &c, err,
		sizeof(err)) == 0) {
		*eq = '\0';
		err[0] = '\0';
		if (cfg_is_mount_key(line, strlen(line)))
			cfg_set_mount(c, line, eq + 1, err, sizeof(err));
		else if (cfg_is_job_opt(line, strlen(line)) &&
			 cfg_set_job(c, line, eq + 1, err, sizeof(err)) != 0 &&
			 err[0] == '\0')
			abort(); /* an error must say why */
		else if (cfg_is_dataset_key(line, strlen(line)) &&
			 cfg_set_dataset_opt(
			     c, line, eq + 1, err, sizeof(err)) != 0 &&
			 err[0] == '\0')
			abort();
		cfg_free(c);
	}
	free(line);
	return 0;
}
